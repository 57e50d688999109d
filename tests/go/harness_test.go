// Package e2e drives the real agent-harness server binary through the generated Go client
// (gen/go), with the real claude CLI talking to the scripted fake Messages API.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
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

// server is one running agent-harness binary with a generated client connected to it.
type server struct {
	// addr is the server's host:port.
	addr string
	// client is the generated SessionService client.
	client pb.SessionServiceClient
	// workDir is the CLI's working directory for every session (a temp dir, so the CLI reads
	// no project settings from the repository).
	workDir string
	logPath string
	cmd     *exec.Cmd
	done    chan error
	conn    *grpc.ClientConn
}

// shared is the server TestMain starts with default flags; a test that needs other flags
// starts its own with startTestServer.
var shared *server

// claudeBin is the real CLI (CLAUDE_BIN); fakeBaseURL the fake Messages API every server's
// CLI talks to; fakeLogPath its log; fakeDumpDir where it writes each request it gets
// (FAKE_MESSAGES_API_DUMP_DIR), so a test can read what the CLI sent (see apiRequestWith).
var claudeBin, fakeBaseURL, fakeLogPath, fakeDumpDir string

// codexBin is the real codex CLI (CODEX_BIN) every server enables with --codex-bin;
// codexHome the CODEX_HOME the fake wrote (--codex-home), whose config.toml points Codex at
// the fake's Responses API.
var codexBin, codexHome string

// geminiBin is the real Gemini CLI (GEMINI_BIN) every server runs as the ACP agent "gemini"
// (--acp-agent); geminiEnv the environment the fake printed for it (--gemini-home: a HOME
// whose settings point Gemini at the fake's Gemini API), as KEY=VALUE words for `env`.
var geminiBin, geminiEnv string

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
			k == "CLAUDECODE" || k == "HOME" || strings.HasPrefix(k, "AGENT_HARNESS_") ||
			strings.HasPrefix(k, "CODEX_") || strings.HasPrefix(k, "OPENAI_") ||
			strings.HasPrefix(k, "GEMINI_") || strings.HasPrefix(k, "GOOGLE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+home,
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// The key variable the fake's Codex provider names (any value is accepted).
		"FAKE_API_KEY=test",
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
	claudeBin = os.Getenv("CLAUDE_BIN")
	if claudeBin == "" {
		fmt.Fprintln(os.Stderr, "CLAUDE_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
		return 1
	}
	// A missing codex fails the suite: every client must see Codex sessions.
	codexBin = os.Getenv("CODEX_BIN")
	if codexBin == "" {
		fmt.Fprintln(os.Stderr, "CODEX_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
		return 1
	}
	// A missing gemini fails the suite too: every client must see ACP sessions.
	geminiBin = os.Getenv("GEMINI_BIN")
	if geminiBin == "" {
		fmt.Fprintln(os.Stderr, "GEMINI_BIN is not set: source .tools/env.sh (tests/setup.sh writes it)")
		return 1
	}
	tmp, err := os.MkdirTemp("", "agent-harness-go-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)

	// The fake Messages API: its first stdout line names its address. Its stdin stays open
	// until we close it (--exit-on-stdin-eof), so it dies with this process whatever happens.
	codexHome = filepath.Join(tmp, "codex-home")
	fake := exec.Command(binPath("FAKE_MESSAGES_API_BIN", "fake-messages-api"), "--port", "0", "--exit-on-stdin-eof", "--codex-home", codexHome,
		"--gemini-home", filepath.Join(tmp, "gemini-home"))
	fakeDumpDir = filepath.Join(tmp, "fake-api-requests")
	if err := os.Mkdir(fakeDumpDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fake.Env = append(os.Environ(), "FAKE_MESSAGES_API_DUMP_DIR="+fakeDumpDir)
	fakeIn, _ := fake.StdinPipe()
	fakeOut, _ := fake.StdoutPipe()
	fakeLogPath = filepath.Join(tmp, "fake-api.log")
	fakeLog, _ := os.Create(fakeLogPath)
	fake.Stderr = fakeLog
	if err := fake.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start fake-messages-api:", err)
		return 1
	}
	defer func() { fakeIn.Close(); _ = fake.Wait() }()
	fakeLines := bufio.NewReader(fakeOut)
	line, err := fakeLines.ReadString('\n')
	baseURL, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "fake-messages-api said %q (%v)\n", line, err)
		return 1
	}
	fakeBaseURL = baseURL
	// The second line: the environment Gemini needs, for --acp-agent.
	line, err = fakeLines.ReadString('\n')
	geminiEnv, ok = strings.CutPrefix(strings.TrimSpace(line), "gemini-env ")
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "fake-messages-api's second line %q (%v), want gemini-env\n", line, err)
		return 1
	}
	go func() { _, _ = io.Copy(io.Discard, fakeLines) }()

	code := 1
	shared, err = startServer(filepath.Join(tmp, "shared"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		dumpLog("fake-messages-api log", fakeLogPath)
		return 1
	}
	defer func() {
		if err := shared.shutdown(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		if code != 0 {
			dumpLog("agent-harness log", shared.logPath)
			dumpLog("fake-messages-api log", fakeLogPath)
		}
	}()
	code = m.Run()
	return code
}

// startServer starts the server binary with its home, CLI working directory, data dir and
// log under dir, plus extra flags, and waits until it serves (over plaintext gRPC).
func startServer(dir string, extra ...string) (*server, error) {
	return startServerDialing(dir, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, extra...)
}

// startServerDialing is startServer with the client connection made with dial (transport
// credentials, per-RPC credentials): the connection waitServing and every helper use.
func startServerDialing(dir string, dial []grpc.DialOption, extra ...string) (*server, error) {
	home := filepath.Join(dir, "home")
	work := filepath.Join(dir, "work")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{addr: fmt.Sprintf("127.0.0.1:%d", port), workDir: work, logPath: filepath.Join(dir, "server.log")}
	serverLog, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	defer serverLog.Close()
	args := append([]string{"serve",
		"--listen", s.addr,
		"--data-dir", filepath.Join(dir, "data"),
		"--adapter", "interactive",
		"--claude-bin", claudeBin,
		"--codex-bin", codexBin,
		"--codex-home", codexHome,
		"--acp-agent", "gemini=env " + geminiEnv + " " + geminiBin + " --acp",
	}, extra...)
	if base := os.Getenv("AGENT_HARNESS_TEST_PG_URL"); base != "" {
		args = append(args, "--store-url", pgStoreURL(base, filepath.Join(dir, "data")))
	}
	s.cmd = exec.Command(binPath("AGENT_HARNESS_BIN", "agent-harness"), args...)
	s.cmd.Env = childEnv(home, fakeBaseURL)
	// A Start without cwd runs the CLI in the server's working directory: keep that a temp dir.
	s.cmd.Dir = work
	s.cmd.Stdout = serverLog
	s.cmd.Stderr = serverLog
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent-harness: %w", err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	s.conn, err = grpc.NewClient(s.addr, dial...)
	if err == nil {
		s.client = pb.NewSessionServiceClient(s.conn)
		err = s.waitServing()
	}
	if err != nil {
		_ = s.shutdown()
		dumpLog("agent-harness log", s.logPath)
		return nil, err
	}
	return s, nil
}

// startTestServer starts a server with extra flags for one test. It is shut down when the
// test ends; its log is printed if the test failed.
func startTestServer(t *testing.T, extra ...string) *server {
	t.Helper()
	return startTestServerIn(t, t.TempDir(), []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, extra...)
}

// startTestServerIn is startTestServer with the server's files under dir (a t.TempDir) and
// the client connection made with dial.
func startTestServerIn(t *testing.T, dir string, dial []grpc.DialOption, extra ...string) *server {
	t.Helper()
	// t.TempDir is removed after this test's other cleanups, so after the server (and with it
	// every CLI process writing under its home) is gone.
	s, err := startServerDialing(dir, dial, extra...)
	if err != nil {
		t.Fatalf("start a server with %v: %v", extra, err)
	}
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			dumpLog("agent-harness "+strings.Join(extra, " ")+" log", s.logPath)
			dumpLog("fake-messages-api log", fakeLogPath)
		}
	})
	return s
}

// shutdown sends SIGTERM, the server's graceful shutdown, which must end it within a few
// seconds; after 15 s it kills the server and reports an error.
func (s *server) shutdown() error {
	if s.conn != nil {
		s.conn.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("agent-harness (%s) did not exit 15 s after SIGTERM; killed it", s.addr)
	}
}

// waitServing polls ListSessions until the server answers (or exits, or 30 s pass).
func (s *server) waitServing() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.client.ListSessions(ctx, &pb.ListSessionsRequest{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case e := <-s.done:
			s.done <- e // shutdown waits on it too
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

// pgStoreURL is the PostgreSQL store of the server whose data dir is
// dataDir when the suite runs on PostgreSQL (tests/run-all.sh sets
// AGENT_HARNESS_TEST_PG_URL): a schema of its own in the shared database,
// named after the data dir, so a restarted server finds its log again.
func pgStoreURL(base, dataDir string) string {
	h := fnv.New64a()
	h.Write([]byte(dataDir))
	return fmt.Sprintf("%s?options=-c%%20search_path%%3Dt_%x", base, h.Sum64())
}
