// Package cli holds fleet-role's commands. Each command is a constructor in a
// file of its own; Main wires them under the root and maps errors to exit
// codes: 0 success, 1 a reading or run that failed, 2 a usage or settings error.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/version"
)

// Exit codes, shared by every command.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// exitError carries an exit code with the error that caused it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is an error for a bad flag, argument or setting: exit 2.
func usageErrorf(format string, a ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, a...)}
}

// UsageError marks err as a usage or settings error: exit 2. Commands built
// outside this package (the demo's) use it with Execute.
func UsageError(err error) error { return usageError(err) }

// usageError marks err as a usage or settings error: exit 2.
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitUsage, err: err}
}

// NewRootCommand builds the whole command tree.
func NewRootCommand() *cobra.Command {
	name := commandName(os.Args[0])
	root := &cobra.Command{
		Use: "fleet-role",
		// The help and usage lines say the name it was run by: "kubectl
		// fleet-role" as a kubectl plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: name},
		Short:       "Measure which k3s hosts are fit to hold an etcd vote, and the swap that would fix an unfit one",
		Long: `fleet-role measures every candidate host's fitness to hold an etcd vote and
reports, with the numbers behind it, which hosts are fit, unfit or unknown, and
the swap of an unfit voter for a fit standby that it would make, or why it would
make none. By default it changes nothing in the cluster; with acting turned on
it carries that swap out, step by step (docs/acting.md).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `fleet-role version` prints.
		Version: version.Get().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		newVersionCommand(),
		newCheckCommand(),
		newDecideCommand(),
		newProbeCommand(),
		newControllerCommand(),
		newActuatorCommand(),
		newRenderCommand(),
		newPrepareFsyncDirCommand(),
		newStatusCommand(name),
		newRecordCommand(name),
		newApproveCommand(name),
		newTimingCommand(),
	)
	return root
}

// Main runs the command line and returns the process's exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainContext(context.Background(), args, stdout, stderr)
}

// MainContext is Main with a context that ends the command's run (status
// --watch ends with it).
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ExecuteContext(ctx, NewRootCommand(), args, stdout, stderr)
}

// Execute runs root with args and returns the process's exit code, with the
// exit codes above; an error is printed on stderr after root's name.
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	return ExecuteContext(context.Background(), root, args, stdout, stderr)
}

// ExecuteContext is Execute with a context that ends the command's run.
func ExecuteContext(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	// Errors are printed once, below, without the usage text.
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Flag parse errors and unknown commands are usage errors (exit 2), as
	// kubectl and most Go tools do.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return ee.code // an exit code that is an answer, not an error (status: a swap)
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	if ee != nil {
		return ee.code
	}
	if cmd == root && !root.Runnable() || isUsage(err) {
		return ExitUsage
	}
	return ExitFail
}

// commandName is the name the binary was run by, for its help: installed as
// kubectl-fleet_role it is a kubectl plugin, run as "kubectl fleet-role"
// (kubectl maps a dash in the command to an underscore in the file name).
func commandName(arg0 string) string {
	base := filepath.Base(arg0)
	if p, ok := strings.CutPrefix(base, "kubectl-"); ok && p != "" {
		return "kubectl " + strings.ReplaceAll(p, "_", "-")
	}
	return "fleet-role"
}

// isUsage recognises cobra's own argument errors, which it does not type.
func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
