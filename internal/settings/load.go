package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// EnvPrefix starts every environment variable that sets a setting: the key in
// upper case, FLEET_ROLE_ELECTION_TIMEOUT for election_timeout.
const EnvPrefix = "FLEET_ROLE_"

// EnvFile names the settings file when --settings is not given.
const EnvFile = "FLEET_ROLE_SETTINGS_FILE"

// ConfigMapKey is the key of the settings file in the fleet-role-settings
// ConfigMap.
const ConfigMapKey = "settings.yaml"

// EnvName is the environment variable that sets key.
func EnvName(key string) string { return EnvPrefix + strings.ToUpper(key) }

// FlagName is the flag that sets key.
func FlagName(key string) string { return strings.ReplaceAll(key, "_", "-") }

// retired names the settings fleet-role no longer has, and why: a file that
// sets one is refused with the reason, a status that records one still reads.
var retired = map[string]string{
	"probe_configmap": "the probes keep one record per host, a ConfigMap named after its node, since fleet-role moved off the shared fleet-role-probe ConfigMap (docs/records.md)",
}

// MaxFileBytes is the largest settings file read: the file is a key of the
// fleet-role-settings ConfigMap, which holds at most 1 MiB (docs/facts.md).
const MaxFileBytes = 1 << 20

// Parse reads a settings file (YAML or JSON) over base. Every key must be a
// known setting, given once (a key given twice is refused with its line,
// rather than the last one silently winning); durations are Go durations
// ("5s"). It does not validate the result: call Validate once every source
// has been applied.
func Parse(data []byte, base Settings) (Settings, error) {
	if len(data) > MaxFileBytes {
		return base, fmt.Errorf("parse settings: %d bytes, more than the %d a ConfigMap holds", len(data), MaxFileBytes)
	}
	// The strict form refuses a mapping key given twice, in YAML and in
	// JSON (which it reads as YAML), naming the key and its line.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return base, fmt.Errorf("parse settings: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return base, nil // an empty file sets nothing
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return base, fmt.Errorf("parse settings: want a mapping of setting names to values: %w", err)
	}
	s := base
	var errs []error
	for _, f := range fields {
		v, ok := raw[f.key]
		if !ok {
			continue
		}
		delete(raw, f.key)
		text, err := scalarText(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.key, err))
			continue
		}
		if err := f.set(&s, text); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if why, ok := retired[k]; ok {
			errs = append(errs, fmt.Errorf("%s: retired: %s; remove it", k, why))
			continue
		}
		errs = append(errs, fmt.Errorf("%s: unknown setting (known: %s)", k, strings.Join(Keys(), ", ")))
	}
	if len(errs) > 0 {
		return base, fmt.Errorf("parse settings: %w", errors.Join(errs...))
	}
	return s, nil
}

// scalarText turns a JSON scalar into the text set parses: a string's
// contents, a number's or a boolean's literal.
func scalarText(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || bytes.Equal(v, []byte("null")):
		return "", errors.New("no value")
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", err
		}
		return s, nil
	case v[0] == '{' || v[0] == '[':
		return "", errors.New("want a single value, not a list or mapping")
	}
	return string(v), nil
}

// ReadFile reads the settings file at path over base. A file that cannot be
// read returns an error wrapping the *fs.PathError.
func ReadFile(path string, base Settings) (Settings, error) {
	f, err := os.Open(path)
	if err != nil {
		return base, fmt.Errorf("read settings file: %w", err)
	}
	defer f.Close()
	// One byte over the limit is enough for Parse to refuse it.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return base, fmt.Errorf("read settings file: %w", err)
	}
	s, err := Parse(data, base)
	if err != nil {
		return base, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// FromEnv applies every FLEET_ROLE_<KEY> variable lookup finds over base.
func FromEnv(base Settings, lookupEnv func(string) (string, bool)) (Settings, error) {
	s := base
	var errs []error
	for _, f := range fields {
		text, ok := lookupEnv(EnvName(f.key))
		if !ok {
			continue
		}
		if err := f.set(&s, text); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvName(f.key), err))
		}
	}
	if len(errs) > 0 {
		return base, errors.Join(errs...)
	}
	return s, nil
}

// Flags holds the settings flags of one command until Load applies them.
type Flags struct {
	file   string
	values []*flagValue
}

// flagValue is one setting's flag; it checks the syntax when the flag is
// parsed, so that a malformed flag is a flag error.
type flagValue struct {
	f    field
	text string
	set  bool
}

func (v *flagValue) String() string { return v.text }

func (v *flagValue) Set(text string) error {
	var probe Settings
	if err := v.f.set(&probe, text); err != nil {
		return err
	}
	v.text, v.set = text, true
	return nil
}

func (v *flagValue) Type() string {
	var probe Settings
	switch v.f.ptr(&probe).(type) {
	case *time.Duration:
		return "duration"
	case *int:
		return "int"
	case *uint64:
		return "bytes"
	case *float64:
		return "float"
	case *bool:
		return "bool"
	}
	return "string"
}

// AddFlags registers --settings and one flag per setting on fs. Flags show
// the defaults in their help but apply only when given.
func AddFlags(fs *pflag.FlagSet) *Flags {
	return AddFlagsOf(fs)
}

// AddFlagsOf is AddFlags for a command that reads only the settings keys
// names (all of them when none is named): its help lists only the flags
// it uses, and a flag it would ignore is refused as unknown. The settings
// file and the environment still give every key, so that the settings it
// reads are validated as the controller's are. A key that is no setting
// panics: the commands name them in code.
func AddFlagsOf(fs *pflag.FlagSet, keys ...string) *Flags {
	fl := &Flags{}
	fs.StringVar(&fl.file, "settings", "", "settings file (YAML or JSON, the keys of the fleet-role-settings ConfigMap); default $"+EnvFile)
	def := Defaults()
	for _, k := range keys {
		if !slices.ContainsFunc(fields, func(f field) bool { return f.key == k }) {
			panic("settings: no key " + k)
		}
	}
	for _, f := range fields {
		if len(keys) > 0 && !slices.Contains(keys, f.key) {
			continue
		}
		v := &flagValue{f: f}
		fl.values = append(fl.values, v)
		help := f.help
		if d := f.format(def); d != "" {
			help += " (default " + d + ")"
		}
		shorthand := ""
		if f.key == "namespace" {
			shorthand = "n" // as kubectl spells it
		}
		fs.VarP(v, FlagName(f.key), shorthand, help+"; env "+EnvName(f.key))
		if v.Type() == "bool" {
			fs.Lookup(FlagName(f.key)).NoOptDefVal = "true"
		}
	}
	return fl
}

// Load applies, over the defaults, the settings file (--settings, else
// $FLEET_ROLE_SETTINGS_FILE), the environment, then the flags given, and
// validates the result. An unreadable file returns an error wrapping its
// *fs.PathError; every other error is a settings error.
func (fl *Flags) Load(lookupEnv func(string) (string, bool)) (Settings, error) {
	s := Defaults()
	path := fl.file
	if path == "" {
		path, _ = lookupEnv(EnvFile)
	}
	var err error
	if path != "" {
		if s, err = ReadFile(path, s); err != nil {
			return s, err
		}
	}
	return fl.over(s, lookupEnv)
}

// LoadFile is Load with the settings file's content given (the
// fleet-role-settings ConfigMap's settings.yaml as the API server serves it)
// in place of the file --settings names: the environment and the flags
// given still apply over it, as at start, and the result is validated.
func (fl *Flags) LoadFile(data []byte, lookupEnv func(string) (string, bool)) (Settings, error) {
	s, err := Parse(data, Defaults())
	if err != nil {
		return s, err
	}
	return fl.over(s, lookupEnv)
}

// over applies the environment, then the flags given, over s, and validates
// the result.
func (fl *Flags) over(s Settings, lookupEnv func(string) (string, bool)) (Settings, error) {
	var err error
	if s, err = FromEnv(s, lookupEnv); err != nil {
		return s, err
	}
	for _, v := range fl.values {
		if v.set {
			if err := v.f.set(&s, v.text); err != nil {
				return s, fmt.Errorf("--%s: %w", FlagName(v.f.key), err)
			}
		}
	}
	return s, s.Validate()
}

// MarshalJSON writes the settings with the keys and syntax of the settings
// file (durations as Go durations), in a fixed order.
func (s Settings) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	def := Defaults()
	first := true
	for _, f := range fields {
		if f.omitDefault && f.format(s) == f.format(def) {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		var v any
		switch p := f.ptr(&s).(type) {
		case *time.Duration:
			v = p.String()
		default:
			v = p
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal setting %s: %w", f.key, err)
		}
		b.Write(enc)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes, over the defaults.
func (s *Settings) UnmarshalJSON(data []byte) error {
	// A status written before a setting was retired still reads: the
	// settings it records are history, not instructions.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err == nil {
		n := len(raw)
		for k := range retired {
			delete(raw, k)
		}
		if len(raw) != n {
			if data, err = json.Marshal(raw); err != nil {
				return err
			}
		}
	}
	v, err := Parse(data, Defaults())
	if err != nil {
		return err
	}
	*s = v
	return nil
}
