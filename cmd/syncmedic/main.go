// Command syncmedic watches Argo CD and Flux, recognises stuck GitOps syncs, and fixes them through each tool's API.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// Exit codes shared by every command.
const (
	exitOK     = 0
	exitStuck  = 1 // scan found something stuck
	exitUsage  = 2 // bad flags, unreadable input
	exitFailed = 3 // an action or a connection failed
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(root.ErrOrStderr(), "syncmedic:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(root.ErrOrStderr(), "syncmedic:", err)
	return exitUsage
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "syncmedic",
		Short: "Find and fix stuck Argo CD and Flux syncs",
		Long: "syncmedic watches Argo CD application operations and Flux HelmReleases, recognises the ways GitOps syncs get\n" +
			"stuck, explains each one with its evidence and exact fix, and applies the fix through the tool's own API when\n" +
			"the policy allows it.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	setVersionFlag(root)
	addExitCodesHelp(root)
	return root
}

// subcommands are registered by the files that define them (one file per command).
var subcommands []func() *cobra.Command
