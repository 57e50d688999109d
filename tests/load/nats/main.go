// Command nats-load is the NATS JetStream peer of the agent-harness load tool
// (tests/load): one measurement per invocation against a running nats-server
// with JetStream, printed as exactly one JSON object on stdout. Progress and
// errors go to stderr; a failed measurement exits non-zero.
//
//	nats-load publish -url nats://127.0.0.1:4222 -sessions N -events M -payload B
//
// N concurrent publishers, one connection and one subject (load.s<i>) each,
// all in one file-storage stream, each publishing M messages of B bytes with
// async publish and a bounded in-flight window (-window, 256). Timed from the
// first publish to the last ack:
//
//	{"measure":"publish","sessions":N,"events":N*M,"secs":S}
//
//	nats-load fanout -url ... -subscribers N -rate R -events M -payload B
//
// N subscribers on one subject, -per-conn (100) to a connection, each an
// ephemeral push consumer (-kind push, the default: no acks, deliver-new,
// consumer state in memory) or an ordered consumer (-kind ordered: the
// client's live tail, ephemeral and pull-based; under overload its missed
// heartbeats make every consumer reset at once, a storm of API requests that
// overflows the server's JetStream API queue: at 10,000 subscribers on a
// 2-core box it delivered about a tenth of the messages in 5 minutes, where
// push consumers delivered all of them); then one publisher publishes M
// messages of B bytes at R per second whose payload starts with the publish
// time (unix nanos, 8 bytes big-endian), each acknowledged by JetStream (so
// stored under the server's sync policy). Each subscriber records receive time
// minus publish time for every message it gets. The run ends when every
// subscriber has all M messages, or -drain (30 s) after the last publish ack.
// Quantiles are nearest-rank, in milliseconds, as in tests/load/src/stats.rs:
//
//	{"measure":"fanout","kind":"push","subscribers":N,"rate":R,
//	 "received":X,"expected":N*M,"latency_ms":{"n":X,"p50":..,"p99":..,"p999":..,"max":..},
//	 "publish_secs":S,...}
//
// With -samples the result also carries every sample, receive minus publish
// in nanoseconds ("samples_ns"), so that rounds run apart can be pooled (the
// load tool interleaves its rows with ours, round by round).
//
// publish_secs is first publish to last ack: above M/R when JetStream could
// not take the rate (the publisher's 256-message window filled), in which case
// the messages went out later than scheduled and the latencies, measured from
// each message's actual publish, do not include that lag.
//
//	nats-load replay-write ... ; nats-load replay-read -url ... -events N -payload B
//
// The replay row: a stream written, then read back whole with an ordered
// consumer, checked message by message (see replay.go).
//
// Each invocation but replay-read deletes and recreates its stream
// (LOAD_PUBLISH, LOAD_FANOUT or LOAD_REPLAY), so runs do not see each
// other's messages. nats-server caps a stream at 1,000 consumers unless the stream says otherwise: LOAD_FANOUT's
// max_consumers is subscribers + 1,000 (room for ordered consumers' resets).
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if len(os.Args) < 2 {
		fatalf("usage: nats-load publish|fanout|replay-write|replay-read [flags] (-h for the flags)")
	}
	measure, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet("nats-load "+measure, flag.ExitOnError)
	url := fs.String("url", nats.DefaultURL, "nats-server URL (JetStream enabled)")
	payload := fs.Int("payload", 900, "message payload, bytes")
	events := fs.Int("events", 1000, "messages per publisher (publish), published (fanout) or in the stream (replay-*)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on the whole measurement after this long")
	var out any
	var err error
	switch measure {
	case "publish":
		sessions := fs.Int("sessions", 1, "concurrent publishers, one connection and subject each")
		window := fs.Int("window", 256, "in-flight async publishes per publisher")
		_ = fs.Parse(args)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		out, err = publish(ctx, *url, *sessions, *events, *payload, *window)
	case "fanout":
		subscribers := fs.Int("subscribers", 1, "subscribers (JetStream consumers) on one subject")
		rate := fs.Float64("rate", 100, "messages published per second")
		perConn := fs.Int("per-conn", 100, "subscribers per connection")
		kind := fs.String("kind", "push", "consumer kind: push (ephemeral push consumers) or ordered (pull, the client's live tail)")
		drain := fs.Duration("drain", 30*time.Second, "after the last publish ack, wait this long for stragglers")
		create := fs.Int("create-concurrency", 32, "consumer creations in flight")
		samples := fs.Bool("samples", false, "also print every sample (samples_ns)")
		_ = fs.Parse(args)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		out, err = fanout(ctx, fanoutOpts{
			url: *url, subscribers: *subscribers, rate: *rate, events: *events,
			payload: *payload, perConn: *perConn, kind: *kind, drain: *drain, create: *create,
			samples: *samples,
		})
	case "replay-write":
		window := fs.Int("window", 4096, "in-flight async publishes")
		_ = fs.Parse(args)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		out, err = replayWrite(ctx, *url, *events, *payload, *window)
	case "replay-read":
		pullMax := fs.Int("pull-max", 0, "messages per pull request (0: the client's default)")
		_ = fs.Parse(args)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		out, err = replayRead(ctx, *url, *events, *payload, *pullMax)
	default:
		fatalf("unknown measurement %q: publish, fanout, replay-write or replay-read", measure)
	}
	if err != nil {
		fatalf("%s: %v", measure, err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fatalf("write the result: %v", err)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "nats-load: "+format+"\n", a...)
	os.Exit(1)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "nats-load: "+format+"\n", a...)
}

func connect(url, name string) (*nats.Conn, error) {
	return nats.Connect(url,
		nats.Name(name),
		nats.NoReconnect(),
		// Room for a connection carrying 100 subscribers' messages.
		nats.ReconnectBufSize(-1),
	)
}

// freshStream deletes the stream if it exists and creates it again: file
// storage, one replica, no limits beyond the server's but room for
// maxConsumers consumers (0: the server's default, 1,000 per stream since
// nats-server 2.12; -1 does not lift it, a stream's own positive limit does).
func freshStream(ctx context.Context, js jetstream.JetStream, name string, subjects []string, maxConsumers int) (jetstream.Stream, error) {
	if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("delete stream %s: %w", name, err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      name,
		Subjects:  subjects,
		Storage:   jetstream.FileStorage,
		Replicas:  1,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardOld,
		// Positive, or the server's default per-stream cap applies.
		MaxConsumers: maxConsumers,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", name, err)
	}
	return s, nil
}

type publishResult struct {
	Measure  string  `json:"measure"`
	Sessions int     `json:"sessions"`
	Events   int64   `json:"events"`
	Secs     float64 `json:"secs"`
	Payload  int     `json:"payload"`
	Window   int     `json:"window"`
}

func publish(ctx context.Context, url string, sessions, events, payload, window int) (*publishResult, error) {
	if sessions < 1 || events < 1 || window < 1 {
		return nil, fmt.Errorf("-sessions, -events and -window must be at least 1")
	}
	admin, err := connect(url, "load-admin")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	defer admin.Close()
	ajs, err := jetstream.New(admin)
	if err != nil {
		return nil, err
	}
	if _, err := freshStream(ctx, ajs, "LOAD_PUBLISH", []string{"load.>"}, 0); err != nil {
		return nil, err
	}

	type publisher struct {
		nc      *nats.Conn
		js      jetstream.JetStream
		subject string
		failed  atomic.Int64
		firstEr atomic.Pointer[error]
	}
	pubs := make([]*publisher, sessions)
	for i := range pubs {
		p := &publisher{subject: fmt.Sprintf("load.s%d", i)}
		p.nc, err = connect(url, fmt.Sprintf("load-pub-%d", i))
		if err != nil {
			return nil, fmt.Errorf("connect publisher %d: %w", i, err)
		}
		defer p.nc.Close()
		p.js, err = jetstream.New(p.nc,
			jetstream.WithPublishAsyncMaxPending(window),
			jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
				p.failed.Add(1)
				p.firstEr.CompareAndSwap(nil, &err)
			}),
		)
		if err != nil {
			return nil, err
		}
		pubs[i] = p
	}
	body := make([]byte, payload)
	for i := range body {
		body[i] = byte('a' + i%26)
	}

	// Every connection is up: release all publishers at once.
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for _, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range events {
				// Blocks (on the client's stall channel, not a poll) while
				// `window` acks are outstanding.
				if _, err := p.js.PublishAsync(p.subject, body, jetstream.WithStallWait(time.Hour)); err != nil {
					errs <- fmt.Errorf("publish on %s: %w", p.subject, err)
					return
				}
			}
			select {
			case <-p.js.PublishAsyncComplete():
			case <-ctx.Done():
				errs <- fmt.Errorf("waiting for the acks on %s: %w", p.subject, ctx.Err())
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	secs := time.Since(t0).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	for _, p := range pubs {
		if n := p.failed.Load(); n > 0 {
			return nil, fmt.Errorf("%d publishes on %s failed, the first: %v", n, p.subject, *p.firstEr.Load())
		}
	}
	// Cross-check against the stream: every acked message is stored.
	info, err := ajs.Stream(ctx, "LOAD_PUBLISH")
	if err != nil {
		return nil, err
	}
	si, err := info.Info(ctx)
	if err != nil {
		return nil, err
	}
	want := uint64(sessions) * uint64(events)
	if si.State.Msgs != want {
		return nil, fmt.Errorf("stream holds %d messages, want %d", si.State.Msgs, want)
	}
	return &publishResult{
		Measure: "publish", Sessions: sessions, Events: int64(want), Secs: secs,
		Payload: payload, Window: window,
	}, nil
}

type fanoutOpts struct {
	url         string
	subscribers int
	rate        float64
	events      int
	payload     int
	perConn     int
	kind        string
	drain       time.Duration
	create      int
	samples     bool
}

type latencyMs struct {
	N    int64   `json:"n"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

type fanoutResult struct {
	Measure     string    `json:"measure"`
	Kind        string    `json:"kind"`
	Subscribers int       `json:"subscribers"`
	Connections int       `json:"connections"`
	Rate        float64   `json:"rate"`
	Events      int       `json:"events"`
	Payload     int       `json:"payload"`
	Received    int64     `json:"received"`
	Expected    int64     `json:"expected"`
	PublishSecs float64   `json:"publish_secs"`
	SetupSecs   float64   `json:"setup_secs"`
	LatencyMs   latencyMs `json:"latency_ms"`
	SamplesNs   []int64   `json:"samples_ns,omitempty"`
}

// subscriber holds one consumer's samples: receive minus publish time, ns.
type subscriber struct {
	mu      sync.Mutex
	closed  bool
	samples []int64
}

func fanout(ctx context.Context, o fanoutOpts) (*fanoutResult, error) {
	if o.subscribers < 1 || o.events < 1 || o.rate <= 0 || o.perConn < 1 || o.create < 1 {
		return nil, fmt.Errorf("-subscribers, -events, -per-conn, -create-concurrency must be at least 1 and -rate positive")
	}
	if o.kind != "ordered" && o.kind != "push" {
		return nil, fmt.Errorf("-kind %q: ordered or push", o.kind)
	}
	o.payload = max(o.payload, 8)
	const stream, subject = "LOAD_FANOUT", "fan.events"

	pubConn, err := connect(o.url, "load-fanout-pub")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", o.url, err)
	}
	defer pubConn.Close()
	pjs, err := jetstream.New(pubConn, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		return nil, err
	}
	if _, err := freshStream(ctx, pjs, stream, []string{subject}, o.subscribers+1000); err != nil {
		return nil, err
	}

	setup := time.Now()
	nconns := (o.subscribers + o.perConn - 1) / o.perConn
	conns := make([]*nats.Conn, nconns)
	jss := make([]jetstream.JetStream, nconns)
	for i := range conns {
		conns[i], err = connect(o.url, fmt.Sprintf("load-fanout-sub-%d", i))
		if err != nil {
			return nil, fmt.Errorf("connect subscriber connection %d of %d: %w", i, nconns, err)
		}
		defer conns[i].Close()
		jss[i], err = jetstream.New(conns[i])
		if err != nil {
			return nil, err
		}
	}

	subs := make([]*subscriber, o.subscribers)
	var received atomic.Int64
	var remaining atomic.Int64
	remaining.Store(int64(o.subscribers))
	allDone := make(chan struct{})
	var consumeErrs atomic.Int64
	var firstConsumeErr atomic.Pointer[error]
	onErr := func(_ jetstream.ConsumeContext, err error) {
		consumeErrs.Add(1)
		firstConsumeErr.CompareAndSwap(nil, &err)
	}
	handler := func(s *subscriber) jetstream.MessageHandler {
		return func(m jetstream.Msg) {
			now := time.Now().UnixNano()
			data := m.Data()
			if len(data) < 8 {
				return
			}
			sent := int64(binary.BigEndian.Uint64(data))
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.samples = append(s.samples, now-sent)
			n := len(s.samples)
			s.mu.Unlock()
			received.Add(1)
			if n == o.events && remaining.Add(-1) == 0 {
				close(allDone)
			}
		}
	}

	// Create and start the consumers, o.create at a time.
	var cctxs []jetstream.ConsumeContext
	var cmu sync.Mutex
	sem := make(chan struct{}, o.create)
	var wg sync.WaitGroup
	var createErr atomic.Pointer[error]
	var created atomic.Int64
	for i := range subs {
		subs[i] = &subscriber{samples: make([]int64, 0, o.events)}
		if createErr.Load() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			js := jss[i/o.perConn]
			s, err := js.Stream(ctx, stream)
			var cc jetstream.ConsumeContext
			if err == nil {
				cc, err = startConsumer(ctx, js, s, conns[i/o.perConn], o.kind, subject, handler(subs[i]), onErr)
			}
			if err != nil {
				err = fmt.Errorf("consumer %d (%d created so far): %w", i, created.Load(), err)
				createErr.CompareAndSwap(nil, &err)
				return
			}
			created.Add(1)
			cmu.Lock()
			cctxs = append(cctxs, cc)
			cmu.Unlock()
		}()
	}
	wg.Wait()
	stopAll := func() {
		for _, cc := range cctxs {
			cc.Stop()
		}
	}
	if e := createErr.Load(); e != nil {
		stopAll()
		return nil, *e
	}
	// Every connection's pull requests / interest are at the server.
	for _, nc := range conns {
		if err := nc.FlushWithContext(ctx); err != nil {
			stopAll()
			return nil, fmt.Errorf("flush: %w", err)
		}
	}
	setupSecs := time.Since(setup).Seconds()
	logf("fanout: %d %s consumers on %d connections ready in %.1f s", o.subscribers, o.kind, nconns, setupSecs)

	// Publish at the rate, on an absolute schedule (no drift).
	body := make([]byte, o.payload)
	for i := 8; i < len(body); i++ {
		body[i] = byte('a' + i%26)
	}
	var pubFailed atomic.Int64
	t0 := time.Now()
	interval := time.Duration(float64(time.Second) / o.rate)
	for i := range o.events {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing, not synchronisation
		}
		msg := slices.Clone(body)
		binary.BigEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
		if _, err := pjs.PublishAsync(subject, msg, jetstream.WithStallWait(time.Hour)); err != nil {
			pubFailed.Add(1)
			logf("fanout: publish %d: %v", i, err)
		}
	}
	select {
	case <-pjs.PublishAsyncComplete():
	case <-ctx.Done():
		stopAll()
		return nil, fmt.Errorf("waiting for the publish acks: %w", ctx.Err())
	}
	publishSecs := time.Since(t0).Seconds()

	deadline := time.NewTimer(o.drain)
	select {
	case <-allDone:
	case <-deadline.C:
		logf("fanout: %d of %d messages received %v after the last ack; giving up",
			received.Load(), int64(o.subscribers)*int64(o.events), o.drain)
	case <-ctx.Done():
	}
	deadline.Stop()
	stopAll()

	var all []int64
	for _, s := range subs {
		s.mu.Lock()
		s.closed = true
		all = append(all, s.samples...)
		s.mu.Unlock()
	}
	if n := consumeErrs.Load(); n > 0 {
		logf("fanout: %d consumer errors reported by the client, the first: %v", n, *firstConsumeErr.Load())
	}
	if n := pubFailed.Load(); n > 0 {
		return nil, fmt.Errorf("%d of %d publishes failed", n, o.events)
	}
	out := &fanoutResult{
		Measure: "fanout", Kind: o.kind, Subscribers: o.subscribers, Connections: nconns,
		Rate: o.rate, Events: o.events, Payload: o.payload,
		Received: int64(len(all)), Expected: int64(o.subscribers) * int64(o.events),
		PublishSecs: publishSecs, SetupSecs: setupSecs, LatencyMs: quantiles(all),
	}
	if o.samples {
		out.SamplesNs = all
	}
	return out, nil
}

func startConsumer(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, nc *nats.Conn, kind, subject string,
	h jetstream.MessageHandler, onErr jetstream.ConsumeErrHandlerFunc) (jetstream.ConsumeContext, error) {
	switch kind {
	case "ordered":
		c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject},
			DeliverPolicy:  jetstream.DeliverNewPolicy,
		})
		if err != nil {
			return nil, err
		}
		return c.Consume(h, jetstream.ConsumeErrHandler(onErr))
	default:
		c, err := s.CreatePushConsumer(ctx, jetstream.ConsumerConfig{
			DeliverSubject:    nc.NewInbox(),
			FilterSubject:     subject,
			DeliverPolicy:     jetstream.DeliverNewPolicy,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			InactiveThreshold: 5 * time.Minute,
		})
		if err != nil {
			return nil, err
		}
		return c.Consume(h, jetstream.ConsumeErrHandler(onErr))
	}
}

// quantiles: nearest rank (the smallest sample with at least q of them at or
// below it), milliseconds; negative samples (clock steps) count as 0.
func quantiles(ns []int64) latencyMs {
	if len(ns) == 0 {
		return latencyMs{}
	}
	slices.Sort(ns)
	ms := func(v int64) float64 { return float64(max(v, 0)) / 1e6 }
	q := func(q float64) float64 {
		rank := int(math.Ceil(float64(len(ns)) * q))
		rank = min(max(rank, 1), len(ns))
		return ms(ns[rank-1])
	}
	return latencyMs{N: int64(len(ns)), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: ms(ns[len(ns)-1])}
}
