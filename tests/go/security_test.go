package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// selfSigned writes a fresh self-signed P-256 certificate for localhost, 127.0.0.1 and ::1
// (valid for an hour) and its key as PEM files into dir, and returns their paths and a pool
// that trusts exactly that certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, "cert.pem")
	keyFile = filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// newToken runs `agent-harness token --out FILE` and checks what it wrote: mode 0600, 64 hex
// digits (256 bits), and usage that names --auth-token-file. It returns the file and token.
func newToken(t *testing.T, dir string) (file, token string) {
	t.Helper()
	file = filepath.Join(dir, "harness.token")
	out, err := exec.Command(binPath("AGENT_HARNESS_BIN", "agent-harness"), "token", "--out", file).CombinedOutput()
	if err != nil {
		t.Fatalf("agent-harness token --out: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--auth-token-file "+file) || !strings.Contains(string(out), "authorization: Bearer") {
		t.Fatalf("agent-harness token printed no usage naming --auth-token-file %s and the header:\n%s", file, out)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("token file mode %#o, want 0600", mode)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	token = strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Fatalf("token file holds %q, want 64 hex digits", data)
	}
	return file, token
}

// bearer is per-RPC credentials sending `authorization: Bearer TOKEN`, only over TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// TestTLSAndToken: a server started with --tls-cert/--tls-key (a certificate generated here)
// and --auth-token-file (written by `agent-harness token`). Over TLS trusting that
// certificate, every RPC without the token, or with another one, is UNAUTHENTICATED, and
// with it a session runs a whole turn; plaintext gRPC, and TLS that does not trust the
// certificate, reach nothing; grpc-web over HTTP/1.1 (ALPN http/1.1) on the same port works.
func TestTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	tokenFile, token := newToken(t, dir)
	// A second `token --out` replaces the file with a new token, still 0600.
	if _, again := newToken(t, t.TempDir()); again == token {
		t.Fatalf("two `agent-harness token` runs wrote the same token")
	}

	tlsCreds := credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	srv := startTestServerIn(t, dir,
		[]grpc.DialOption{grpc.WithTransportCredentials(tlsCreds), grpc.WithPerRPCCredentials(bearer(token))},
		"--tls-cert", certFile, "--tls-key", keyFile, "--auth-token-file", tokenFile)

	dial := func(opts ...grpc.DialOption) pb.SessionServiceClient {
		t.Helper()
		conn, err := grpc.NewClient(srv.addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return pb.NewSessionServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// TLS, no token: refused before the service sees the call, unary and streaming alike.
	noToken := dial(grpc.WithTransportCredentials(tlsCreds))
	if _, err := noToken.ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListSessions over TLS without the token: %v, want UNAUTHENTICATED", err)
	}
	if _, err := noToken.Start(ctx, &pb.StartRequest{SessionId: newSessionID("tls-anon"), Config: &pb.StartConfig{Prompt: "TEXT nope", Cwd: srv.workDir}}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Start over TLS without the token: %v, want UNAUTHENTICATED", err)
	}
	sub, err := noToken.Subscribe(ctx, &pb.SubscribeRequest{SessionId: newSessionID("tls-anon")})
	if err == nil {
		_, err = sub.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Subscribe over TLS without the token: %v, want UNAUTHENTICATED", err)
	}
	// Another token of the same shape is no better.
	wrong := dial(grpc.WithTransportCredentials(tlsCreds), grpc.WithPerRPCCredentials(bearer(strings.Repeat("0", 64))))
	if _, err := wrong.ListSessions(ctx, &pb.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListSessions with a wrong token: %v, want UNAUTHENTICATED", err)
	}

	// Plaintext gRPC to the TLS port gets no answer at all.
	plain := dial(grpc.WithTransportCredentials(insecure.NewCredentials()))
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = plain.ListSessions(pctx, &pb.ListSessionsRequest{})
	pcancel()
	if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
		t.Fatalf("plaintext ListSessions to the TLS port: %v, want UNAVAILABLE (no connection)", err)
	}
	t.Logf("plaintext gRPC to the TLS port: %v", err)
	// TLS that trusts only the system roots rejects the self-signed certificate: the client
	// really talks to the certificate generated above.
	untrusted := dial(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})))
	uctx, ucancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = untrusted.ListSessions(uctx, &pb.ListSessionsRequest{})
	ucancel()
	if c := status.Code(err); c != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("ListSessions over TLS not trusting the certificate: %v, want UNAVAILABLE (certificate error)", err)
	}
	t.Logf("TLS not trusting the certificate: %v", err)

	// With the token, over TLS: a whole turn, followed live through Subscribe.
	id := newSessionID("tls")
	if _, err := srv.client.ListSessions(ctx, &pb.ListSessionsRequest{}); err != nil {
		t.Fatalf("ListSessions over TLS with the token: %v", err)
	}
	s := srv.subscribe(t, id, 0)
	st := srv.start(t, id, "TEXT go over tls")
	ready, _ := s.waitEvent(0, turnTimeout, "run_ready", isKind("run_ready"))
	if ready.GetRunId() != st.GetRunId() {
		t.Fatalf("run_ready of run %q, Start returned %q", ready.GetRunId(), st.GetRunId())
	}
	c, j := s.waitEvent(0, turnTimeout, "content", isKind("content"))
	if contentText(c) != "go over tls" {
		t.Fatalf("answer over TLS %q, want %q", contentText(c), "go over tls")
	}
	end, _ := s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
	if end.GetTurnEnd().GetIsError() {
		t.Fatalf("turn over TLS failed: %v", end.GetTurnEnd())
	}
	srv.waitStatus(t, id, pb.SessionStatus_SESSION_STATUS_IDLE, 10*time.Second)
	list, err := srv.client.ListSessions(ctx, &pb.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sess := range list.GetSessions() {
		found = found || sess.GetSessionId() == id
	}
	if !found {
		t.Fatalf("ListSessions over TLS does not list %s: %v", id, list)
	}

	// grpc-web over HTTP/1.1 on the same TLS port (ALPN http/1.1), with and without the token.
	if code, proto := grpcWebListSessions(t, srv.addr, pool, token); code != "0" || proto != "http/1.1" {
		t.Fatalf("grpc-web ListSessions over TLS with the token: grpc-status %s over %q, want 0 over http/1.1", code, proto)
	}
	if code, _ := grpcWebListSessions(t, srv.addr, pool, ""); code != fmt.Sprint(int(codes.Unauthenticated)) {
		t.Fatalf("grpc-web ListSessions over TLS without the token: grpc-status %s, want %d (UNAUTHENTICATED)", code, codes.Unauthenticated)
	}
}

// grpcWebListSessions calls ListSessions as grpc-web over HTTP/1.1 TLS (ALPN offers only
// http/1.1) and returns the grpc-status (from the headers of a trailers-only answer, else
// from the trailer frame) and the negotiated ALPN protocol.
func grpcWebListSessions(t *testing.T, addr string, pool *x509.CertPool, token string) (grpcStatus, alpn string) {
	t.Helper()
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: false,
			TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		},
	}
	defer client.CloseIdleConnections()
	// One uncompressed frame holding an empty ListSessionsRequest.
	frame := make([]byte, 5)
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/agentharness.v1.SessionService/ListSessions", bytes.NewReader(frame))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/grpc-web+proto")
	req.Header.Set("x-grpc-web", "1")
	if token != "" {
		req.Header.Set("authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("grpc-web POST over TLS: %v", err)
	}
	defer resp.Body.Close()
	if resp.TLS != nil {
		alpn = resp.TLS.NegotiatedProtocol
	}
	if resp.ProtoMajor != 1 {
		t.Fatalf("grpc-web answered over %s, want HTTP/1.1", resp.Proto)
	}
	if s := resp.Header.Get("grpc-status"); s != "" {
		return s, alpn
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for len(body) >= 5 {
		flags, n := body[0], binary.BigEndian.Uint32(body[1:5])
		if uint32(len(body)-5) < n {
			break
		}
		payload := body[5 : 5+n]
		body = body[5+n:]
		if flags&0x80 == 0 {
			continue
		}
		for _, line := range strings.Split(string(payload), "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "grpc-status") {
				return strings.TrimSpace(v), alpn
			}
		}
	}
	t.Fatalf("grpc-web answer (HTTP %d) without grpc-status", resp.StatusCode)
	return "", alpn
}

// TestStartConfigPolicy: without --allow-env / --allow-arg, a Start whose env sets
// ANTHROPIC_BASE_URL or whose args carry --dangerously-skip-permissions is INVALID_ARGUMENT
// naming the field, and creates no session; a flag of the default safe set is accepted.
func TestStartConfigPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	refused := []struct {
		name  string
		cfg   *pb.StartConfig
		field string
	}{
		{"env", &pb.StartConfig{Prompt: "TEXT nope", Cwd: shared.workDir, Env: map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}}, "config.env.ANTHROPIC_BASE_URL"},
		{"args", &pb.StartConfig{Prompt: "TEXT nope", Cwd: shared.workDir, Args: []string{"--dangerously-skip-permissions"}}, "config.args[0]"},
		{"args-later", &pb.StartConfig{Prompt: "TEXT nope", Cwd: shared.workDir, Args: []string{"--max-turns", "3", "--permission-mode", "bypassPermissions"}}, "config.args[2]"},
		{"env-sandbox", &pb.StartConfig{Prompt: "TEXT nope", Cwd: shared.workDir, Env: map[string]string{"IS_SANDBOX": "1"}}, "config.env.IS_SANDBOX"},
	}
	for _, tc := range refused {
		id := newSessionID("policy-" + tc.name)
		_, err := shared.client.Start(ctx, &pb.StartRequest{SessionId: id, Config: tc.cfg})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Fatalf("Start with %s %v %v: %v, want INVALID_ARGUMENT naming %s", tc.name, tc.cfg.GetArgs(), tc.cfg.GetEnv(), err, tc.field)
		}
		if _, err := shared.client.GetSession(ctx, &pb.GetSessionRequest{SessionId: id}); status.Code(err) != codes.NotFound {
			t.Fatalf("GetSession after a refused Start (%s): %v, want NOT_FOUND", tc.name, err)
		}
	}

	// A flag of the default safe set passes and reaches a running CLI.
	id := newSessionID("policy-ok")
	s := shared.subscribe(t, id, 0)
	if _, err := shared.client.Start(ctx, &pb.StartRequest{SessionId: id, Config: &pb.StartConfig{
		Prompt: "TEXT allowed args", Cwd: shared.workDir, Args: []string{"--max-turns", "3"},
	}}); err != nil {
		t.Fatalf("Start with args [--max-turns 3]: %v", err)
	}
	rs, _ := s.waitEvent(0, turnTimeout, "run_start", isKind("run_start"))
	if got := rs.GetRunStart().GetConfig().GetArgs(); len(got) != 2 || got[0] != "--max-turns" || got[1] != "3" {
		t.Fatalf("run_start records args %v, want [--max-turns 3]", got)
	}
	c, j := s.waitEvent(0, turnTimeout, "content", isKind("content"))
	if contentText(c) != "allowed args" {
		t.Fatalf("answer %q", contentText(c))
	}
	s.waitEvent(j, turnTimeout, "turn_end", isKind("turn_end"))
}
