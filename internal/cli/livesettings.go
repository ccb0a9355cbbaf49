package cli

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/livesettings"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// settingsConfigMapFlag adds --settings-configmap, the ConfigMap whose
// settings file a long-running component follows while it runs.
func settingsConfigMapFlag(f *pflag.FlagSet, name *string) {
	f.StringVar(name, "settings-configmap", "", "follow this ConfigMap of the namespace while running (the manifests name fleet-role-settings): a valid change of its "+settings.ConfigMapKey+
		" is applied at the next period boundary, with the environment and the flags over it as at start; a change that does not validate, or that sets a key applying only at a restart, is refused and the settings in force stay (docs/install.md, Change the settings); empty: the settings stay as read at start")
}

// followSettings returns the parts that follow the settings ConfigMap name
// and hand each outcome to apply, or none when name is empty.
func followSettings(client *kube.Client, s settings.Settings, sf *settings.Flags, name string, reg prometheus.Registerer, log *slog.Logger, apply func(settings.Settings, settings.Source)) []part {
	if name == "" {
		return nil
	}
	watch := client.NewSettingsInformer(s.Namespace, name)
	f := &livesettings.Follower{
		Watch:     watch,
		ConfigMap: s.Namespace + "/" + name,
		Load:      func(data []byte) (settings.Settings, error) { return sf.LoadFile(data, os.LookupEnv) },
		Apply:     apply,
		Log:       log,
		Metrics:   livesettings.NewMetrics(reg),
	}
	f.Start(s)
	return []part{{"settings informer", watch.Run}, {"settings follower", f.Run}}
}
