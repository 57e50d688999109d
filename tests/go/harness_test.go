// Package e2e drives the real agent-harness server binary through the generated Go client
// (gen/go), with the real claude CLI talking to the scripted fake Messages API.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// client is the generated SessionService client connected to the server TestMain started.
var client pb.SessionServiceClient

// serverAddr is the server's host:port.
var serverAddr string

// workDir is the CLI's working directory for every session (a temp dir, so the CLI reads no
// project settings from the repository).
var workDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// repoRoot is two levels up from this package (tests/go).
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// binPath returns $envVar when set, else the release binary of the workspace.
func binPath(envVar, name string) string {
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	return filepath.Join(repoRoot(), "target", "release", name)
}

// childEnv is this process's environment without anything that could point the CLI at the
// real API or make it think it runs inside Claude Code, plus the fake API's settings.
func childEnv(home, baseURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "CLAUDE_CODE_") ||
			k == "CLAUDECODE" || k == "HOME" || strings.HasPrefix(k, "AGENT_HARNESS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+home,
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	)
}

// freePort asks the kernel for a free loopback port. The server gets it as --listen; the
// short window in which another process could take it is acceptable for a test machine.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func runMain(m *testing.M) int {
	claudeBin := os.Getenv("CLAUDE_BIN")
	if claudeBin == "" {
		fmt.Fprintln(os.Stderr, "CLAUDE_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
		return 1
	}
	tmp, err := os.MkdirTemp("", "agent-harness-go-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	workDir = filepath.Join(tmp, "work")
	for _, d := range []string{home, workDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}

	// The fake Messages API: its first stdout line names its address. Its stdin stays open
	// until we close it (--exit-on-stdin-eof), so it dies with this process whatever happens.
	fake := exec.Command(binPath("FAKE_MESSAGES_API_BIN", "fake-messages-api"), "--port", "0", "--exit-on-stdin-eof")
	fakeIn, _ := fake.StdinPipe()
	fakeOut, _ := fake.StdoutPipe()
	fakeLog, _ := os.Create(filepath.Join(tmp, "fake-api.log"))
	fake.Stderr = fakeLog
	if err := fake.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start fake-messages-api:", err)
		return 1
	}
	defer func() { fakeIn.Close(); _ = fake.Wait() }()
	line, err := bufio.NewReader(fakeOut).ReadString('\n')
	baseURL, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "fake-messages-api said %q (%v)\n", line, err)
		return 1
	}
	go func() { _, _ = io.Copy(io.Discard, fakeOut) }()

	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	serverAddr = addr
	serverLogPath := filepath.Join(tmp, "server.log")
	serverLog, _ := os.Create(serverLogPath)
	server := exec.Command(binPath("AGENT_HARNESS_BIN", "agent-harness"), "serve",
		"--listen", addr,
		"--data-dir", filepath.Join(tmp, "data"),
		"--adapter", "interactive",
		"--claude-bin", claudeBin,
	)
	server.Env = childEnv(home, baseURL)
	// A Start without cwd runs the CLI in the server's working directory: keep that a temp dir.
	server.Dir = workDir
	server.Stdout = serverLog
	server.Stderr = serverLog
	if err := server.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start agent-harness:", err)
		return 1
	}
	serverDone := make(chan error, 1)
	go func() { serverDone <- server.Wait() }()
	code := 1
	defer func() {
		// SIGTERM is the server's graceful shutdown; it must end within a few seconds.
		_ = server.Process.Signal(syscall.SIGTERM)
		select {
		case <-serverDone:
		case <-time.After(15 * time.Second):
			fmt.Fprintln(os.Stderr, "agent-harness did not exit 15 s after SIGTERM; killing it")
			_ = server.Process.Kill()
			<-serverDone
			code = 1
		}
		if code != 0 {
			dumpLog("agent-harness log", serverLogPath)
			dumpLog("fake-messages-api log", filepath.Join(tmp, "fake-api.log"))
		}
	}()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	client = pb.NewSessionServiceClient(conn)
	if err := waitServing(serverDone); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code = m.Run()
	return code
}

// waitServing polls ListSessions until the server answers (or exits, or 30 s pass).
func waitServing(serverDone <-chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.ListSessions(ctx, &pb.ListSessionsRequest{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case e := <-serverDone:
			return fmt.Errorf("agent-harness exited before serving: %v", e)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent-harness not serving after 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dumpLog prints the last 60 lines of a log file to stderr.
func dumpLog(title, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	fmt.Fprintf(os.Stderr, "----- %s (last %d lines) -----\n%s\n", title, len(lines), strings.Join(lines, "\n"))
}
