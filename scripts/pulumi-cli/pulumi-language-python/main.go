// Command pulumi-language-python is the Python language host that scripts/pulumi-cli.sh builds next to the
// Pulumi CLI when the upstream one cannot be had.
//
// Why this exists: the upstream host lives in its own Go module,
// github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3, which has no release tags; the Go module
// proxy that this project's machines reach refuses every version of it (403 "This module version is not
// available", for the release pseudo-versions too), while it serves the CLI (pkg/v3) and the SDK (sdk/v3). The
// CLI cannot run a Python program without a language host, so this one does the host's job with the SDK's own
// parts: sdk/v3's python/toolchain resolves the interpreter exactly as the upstream host does (pip, uv or poetry,
// the `virtualenv` option relative to the project root), and the program is run by the SDK's own
// `pulumi-language-python-exec` shim, copied next to this binary from the same sdk/v3 module. Dynamic providers
// are untouched by it: the engine starts them through the `pulumi-resource-pulumi-python` script, not through the
// language host.
//
// Plugins as upstream installs and runs them: a plugin folder whose PulumiPlugin.yaml says `runtime: python`
// (an archive that `pulumi plugin install` unpacks, or one the engine downloads on first use) gets a venv of
// its own, `venv` in the folder, unless its runtime options name another toolchain or virtualenv or it lies in a
// uv or poetry project (see inLockedProject: there it keeps the project's venv, unlike upstream): the engine
// asks InstallDependencies (IsPlugin) at install time, which makes that venv and installs the folder's
// requirements.txt into it, and RunPlugin runs the folder's __main__.py with that venv's Python. Without this
// default the install went to whatever `python3` came first on PATH (a user's system Python, another
// project's venv) and the plugin then ran with it. A policy pack (kind analyzer) keeps the program's rules.
//
// What it leaves out, compared with upstream: plugin discovery from installed packages (GetRequiredPackages
// answers none, which is right for a program of dynamic resources only), type checkers, `pulumi new` prompts,
// code generation, and plugins that are buildable packages (RunPlugin runs a folder's __main__.py only, which
// is what a Python policy pack and this project's plugin archives are). Everything it does not implement answers
// gRPC Unimplemented, which the engine treats as "an older host" where it can.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/version"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The exec shim exits with this code after it has shown the user an actionable message (the Python SDK's
// convention); the engine is then told to bail without adding a message of its own.
const userActionableExitCode = 32

// How long a plugin has to exit after SIGTERM before it is killed: the provider plugin waits up to 30 s for
// POSTs in flight to answer (lifeline.POST_GRACE), then records its journal entries.
const pluginGrace = 45 * time.Second

func main() {
	// The engine passes logging and tracing flags to every plugin (-v and --logtostderr are already registered
	// by the SDK's logging package); the others are accepted and ignored here.
	for name, usage := range map[string]string{
		"logflow": "flow logging settings to child processes (ignored)",
		"tracing": "Zipkin-compatible tracing endpoint (ignored)",
		"root":    "project root (ignored: the Handshake and ProgramInfo carry it)",
	} {
		if flag.Lookup(name) == nil {
			flag.String(name, "", usage)
		}
	}
	flag.Parse()

	self, err := os.Executable()
	if err != nil {
		fatal("finding this executable: %v", err)
	}
	execShim := filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	if _, err := os.Stat(execShim); err != nil {
		fatal("the Python exec shim is missing next to the language host (%s): rebuild with scripts/pulumi-cli.sh", execShim)
	}

	host := &pythonHost{execShim: execShim}
	if args := flag.Args(); len(args) > 0 {
		host.engineAddress = args[0]
	}
	stop := make(chan bool)
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stop,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
		Options: rpcutil.OpenTracingServerInterceptorOptions(nil),
	})
	if err != nil {
		fatal("starting the language host's gRPC server: %v", err)
	}
	// The engine reads the port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)

	engineGone := make(chan struct{}, 1)
	go watchEngine(host.engineAddress, engineGone)
	select {
	case err := <-handle.Done:
		if err != nil {
			fatal("the language host's gRPC server stopped: %v", err)
		}
	case <-engineGone:
		// Nothing is printed: stdout and stderr are pipes to the dead engine, and a write there would end this
		// process with SIGPIPE before its plugins had their grace. The requests in flight end with the
		// engine's connection: the program is killed with its Run, a plugin gets SIGTERM and its grace. The
		// graceful stop waits for them, never longer than that grace.
		close(stop)
		select {
		case <-handle.Done:
		case <-time.After(pluginGrace + 5*time.Second):
		}
	}
}

// How often the host looks for its engine: a killed CLI leaves its language host behind for at most this long
// (plus the end of the requests in flight).
const engineCheckInterval = time.Second

// watchEngine reports once the engine that started this host is gone. The engine ends its hosts itself when
// it is done with them, but a CLI that is killed (SIGKILL, a CI runner's hard cancel, an OOM kill) ends
// nothing, and a host serving on would outlive it for as long as the machine runs. Two signs, checked every
// engineCheckInterval: this process was re-parented (its parent, the CLI, died), or the engine's gRPC server
// no longer answers its health check (the upstream host's sign, which it checks every 5 minutes).
func watchEngine(address string, gone chan<- struct{}) {
	parent := os.Getppid()
	var health healthpb.HealthClient
	if address != "" {
		conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()),
			rpcutil.GrpcChannelOptions())
		if err == nil {
			defer conn.Close()
			health = healthpb.NewHealthClient(conn)
		}
	}
	for range time.Tick(engineCheckInterval) {
		if os.Getppid() != parent {
			gone <- struct{}{}
			return
		}
		if health == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*engineCheckInterval)
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		// Unimplemented is an engine that answers; a deadline is a busy one. Anything else: nobody listens.
		if err != nil && status.Code(err) != codes.Unimplemented && status.Code(err) != codes.DeadlineExceeded {
			gone <- struct{}{}
			return
		}
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: "+format+"\n", args...)
	os.Exit(1)
}

type pythonHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer

	execShim string

	mu            sync.Mutex
	engineAddress string
}

func (h *pythonHost) Handshake(
	_ context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.engineAddress = req.GetEngineAddress()
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *pythonHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version.Version}, nil
}

// GetRequiredPlugins and GetRequiredPackages answer "none": the upstream host lists the Pulumi packages
// installed in the venv, and a program of dynamic resources needs no plugin beyond the Python one the engine
// always has.
func (h *pythonHost) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *pythonHost) GetRequiredPackages(
	context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

// Run executes the program with the project's Python, through the SDK's exec shim, and reports its outcome.
func (h *pythonHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	tc, err := resolveToolchain(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	engine := h.engineAddress
	h.mu.Unlock()

	args := []string{"-u", h.execShim}
	add := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", engine)
	add("project", req.GetProject())
	add("root_directory", req.GetInfo().GetRootDirectory())
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", fmt.Sprintf("%v", req.GetDryRun()))
	add("parallel", fmt.Sprint(req.GetParallel()))
	add("organization", req.GetOrganization())
	program := req.GetInfo().GetEntryPoint()
	if program == "" {
		program = req.GetProgram() //nolint:staticcheck // older engines send only this field
	}
	if program == "" {
		program = "."
	}
	args = append(args, program)
	args = append(args, req.GetArgs()...)

	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("preparing the Python command: %w", err)
	}
	// A stack with no config sends none: the variable is then left out, as the upstream host does (the SDK
	// reads an unset PULUMI_CONFIG as no config, while the JSON of a nil map, `null`, fails in set_all_config).
	var config []byte
	if req.GetConfig() != nil {
		if config, err = json.Marshal(req.GetConfig()); err != nil {
			return nil, fmt.Errorf("serializing the stack configuration: %w", err)
		}
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretKeysJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("serializing the secret configuration keys: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if config != nil {
		cmd.Env = append(cmd.Env, "PULUMI_CONFIG="+string(config))
	}
	cmd.Env = append(cmd.Env, "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeysJSON))
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if dir := req.GetInfo().GetProgramDirectory(); dir != "" && cmd.Dir == "" {
		cmd.Dir = dir
	}

	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if exitErr.ExitCode() == userActionableExitCode {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{
				Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode()),
			}, nil
		}
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("Problem executing program (could not run language executor): %v", err),
		}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// RunPlugin runs a Python plugin folder: `python <folder> <args...>` (its __main__.py) with the toolchain of
// its runtime options. The engine calls it for a policy pack (`pulumi preview --policy-pack <folder>` with a
// PulumiPolicy.yaml of runtime python); the pack serves the analyzer and prints its port on stdout, which is
// streamed back to the engine.
func (h *pythonHost) RunPlugin(
	req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer,
) error {
	info := req.GetInfo()
	// A policy pack runs as a program does; every other kind of plugin in its own venv (upstream's rule).
	tc, err := resolveToolchain(info, req.GetKind() != analyzerKind)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(info.GetProgramDirectory(), "__main__.py")); err != nil {
		return fmt.Errorf("the plugin folder %s has no __main__.py: this build's Python language host runs "+
			"only plugin folders with one (install the official Pulumi CLI for buildable packages)",
			info.GetProgramDirectory())
	}
	args := append([]string{info.GetProgramDirectory()}, req.GetArgs()...)
	cmd, err := tc.Command(server.Context(), args...)
	if err != nil {
		return fmt.Errorf("preparing the Python command: %w", err)
	}
	// When the engine's stream ends (the CLI is gone, or done with the plugin), the plugin gets SIGTERM and a
	// grace period rather than SIGKILL: a provider plugin in the middle of a create records what it made (the
	// create journal) before it exits.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = pluginGrace
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	cmd.Dir = req.GetPwd()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, req.GetEnv()...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			//nolint:gosec // an exit code fits in 8 bits
			return server.Send(&pulumirpc.RunPluginResponse{
				Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(exitErr.ExitCode())},
			})
		}
		return fmt.Errorf("running the plugin %s: %w", info.GetProgramDirectory(), err)
	}
	return closer.Close()
}

// InstallDependencies makes the venv and installs the project's dependencies with its toolchain (`pulumi install`).
func (h *pythonHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	tc, err := resolveToolchain(req.GetInfo(), req.GetIsPlugin())
	if err != nil {
		return err
	}
	stdout := &streamWriter{send: func(b []byte) error {
		return server.Send(&pulumirpc.InstallDependenciesResponse{Stdout: b})
	}}
	stderr := &streamWriter{send: func(b []byte) error {
		return server.Send(&pulumirpc.InstallDependenciesResponse{Stderr: b})
	}}
	dir := req.GetInfo().GetProgramDirectory()
	return tc.InstallDependencies(server.Context(), dir, req.GetUseLanguageVersionTools(), true, stdout, stderr)
}

func (h *pythonHost) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	tc, err := resolveToolchain(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	info, err := tc.About(ctx)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{Executable: info.PythonExecutable, Version: info.PythonVersion.String()}, nil
}

func (h *pythonHost) GetProgramDependencies(
	ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	tc, err := resolveToolchain(req.GetInfo(), false)
	if err != nil {
		return nil, err
	}
	packages, err := tc.ListPackages(ctx, req.GetTransitiveDependencies())
	if err != nil {
		return nil, err
	}
	deps := make([]*pulumirpc.DependencyInfo, 0, len(packages))
	for _, p := range packages {
		deps = append(deps, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return &pulumirpc.GetProgramDependenciesResponse{Dependencies: deps}, nil
}

// The plugin kind of a policy pack (apitype.AnalyzerPlugin), as RunPluginRequest.Kind names it.
const analyzerKind = "analyzer"

// pluginVirtualenv is the venv of a plugin folder whose runtime options name none (upstream's default).
const pluginVirtualenv = "venv"

// resolveToolchain reads the project's runtime options (`toolchain`, `virtualenv`) as the upstream host does
// and hands them to the SDK's toolchain package, which owns the venv rules. A plugin (isPlugin) never runs in
// the ambient Python: with pip, or no toolchain named, its venv is the folder's `venv` unless the options name
// one (upstream's parseOptions does the same; a program keeps the ambient Python for compatibility).
func resolveToolchain(info *pulumirpc.ProgramInfo, isPlugin bool) (toolchain.Toolchain, error) {
	opts := toolchain.PythonOptions{
		Root:       info.GetRootDirectory(),
		ProgramDir: info.GetProgramDirectory(),
		Toolchain:  toolchain.Auto,
	}
	fields := info.GetOptions().GetFields()
	if v, ok := fields["virtualenv"]; ok {
		opts.Virtualenv = v.GetStringValue()
		// Upstream: a virtualenv without a toolchain means pip.
		opts.Toolchain = toolchain.Pip
	}
	if v, ok := fields["toolchain"]; ok {
		switch name := v.GetStringValue(); name {
		case "pip":
			opts.Toolchain = toolchain.Pip
		case "uv":
			opts.Toolchain = toolchain.Uv
		case "poetry":
			opts.Toolchain = toolchain.Poetry
		default:
			return nil, fmt.Errorf("unsupported Python toolchain %q in Pulumi.yaml: use pip, uv or poetry", name)
		}
	}
	if isPlugin && opts.Virtualenv == "" && (opts.Toolchain == toolchain.Pip ||
		(opts.Toolchain == toolchain.Auto && !inLockedProject(info.GetProgramDirectory()))) {
		opts.Virtualenv = pluginVirtualenv
	}
	if v, ok := fields["typechecker"]; ok && v.GetStringValue() != "" {
		return nil, fmt.Errorf("the runtime option typechecker (%q) is not supported by this build's Python "+
			"language host: remove it, or install the official Pulumi CLI", v.GetStringValue())
	}
	return toolchain.ResolveToolchain(opts)
}

// inLockedProject reports whether dir is inside a uv or poetry project (a uv.lock or poetry.lock in it or above),
// which the toolchain package's Auto resolution would pick. There a plugin keeps its project's venv: upstream gives
// it a `venv` of its own inside the plugin folder and syncs the whole project into it, which for a plugin folder
// of a source checkout (`pulumi package get-schema provider/pulumi_together_rl/plugin`) puts a venv inside the
// package, where the next build would pack it. An installed plugin (an archive unpacked under ~/.pulumi/plugins)
// is in no project and gets its own venv, as upstream.
func inLockedProject(dir string) bool {
	for dir != "" {
		for _, lock := range []string{"uv.lock", "poetry.lock"} {
			if _, err := os.Stat(filepath.Join(dir, lock)); err == nil {
				return true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
	return false
}

// streamWriter turns the toolchain's output into InstallDependencies stream messages.
type streamWriter struct {
	send func([]byte) error
}

var _ io.Writer = (*streamWriter)(nil)

func (w *streamWriter) Write(p []byte) (int, error) {
	b := make([]byte, len(p))
	copy(b, p)
	if err := w.send(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
