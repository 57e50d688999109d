package main

// The replay measurements: the JetStream peer of the load tool's replay row
// (one Subscribe from seq 0 over a long log). Two invocations, so that the
// caller can restart nats-server and drop the page cache between them:
//
//	nats-load replay-write -url ... -events N -payload B
//
// deletes and recreates the file-storage stream LOAD_REPLAY and publishes N
// messages of B bytes on one subject, async with acks (-window, 4,096 in
// flight), message i (from 1) carrying i in its first 8 bytes (little-endian);
// then checks the stream holds exactly N. Not a throughput figure (the caller
// picks the server's sync policy for the writing): {"measure":"replay-write",
// "events":N,"secs":S}.
//
//	nats-load replay-read -url ... -events N -payload B
//
// reads the whole stream back with an ordered consumer (nats.go's jetstream
// package: ephemeral, pull-based, no acks, what the client offers to read a
// stream in order) from the first message, with the client's default pull
// settings unless -pull-max says otherwise. Every message must be the next
// one (its stamp and size checked, as the load tool checks every seq of its
// own replay): a message lost, repeated or out of order fails the run.
// Timed from creating the consumer to the last message:
// {"measure":"replay-read","events":N,"secs":S}.

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const replayStream, replaySubject = "LOAD_REPLAY", "replay.events"

type replayResult struct {
	Measure string  `json:"measure"`
	Events  int64   `json:"events"`
	Payload int     `json:"payload"`
	Secs    float64 `json:"secs"`
}

func replayWrite(ctx context.Context, url string, events, payload, window int) (*replayResult, error) {
	if events < 1 || window < 1 {
		return nil, fmt.Errorf("-events and -window must be at least 1")
	}
	payload = max(payload, 8)
	nc, err := connect(url, "load-replay-write")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(window),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, &err)
		}),
	)
	if err != nil {
		return nil, err
	}
	if _, err := freshStream(ctx, js, replayStream, []string{replaySubject}, 0); err != nil {
		return nil, err
	}
	body := make([]byte, payload)
	for i := 8; i < len(body); i++ {
		body[i] = byte('a' + i%26)
	}
	t0 := time.Now()
	for i := 1; i <= events; i++ {
		// PublishAsync keeps the slice until the ack: each message its own.
		msg := make([]byte, payload)
		copy(msg, body)
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if _, err := js.PublishAsync(replaySubject, msg, jetstream.WithStallWait(time.Hour)); err != nil {
			return nil, fmt.Errorf("publish %d: %w", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the publish acks: %w", ctx.Err())
	}
	secs := time.Since(t0).Seconds()
	if n := failed.Load(); n > 0 {
		return nil, fmt.Errorf("%d of %d publishes failed, the first: %v", n, events, *firstErr.Load())
	}
	if err := streamHolds(ctx, js, uint64(events)); err != nil {
		return nil, err
	}
	return &replayResult{Measure: "replay-write", Events: int64(events), Payload: payload, Secs: secs}, nil
}

// streamHolds checks LOAD_REPLAY holds exactly want messages.
func streamHolds(ctx context.Context, js jetstream.JetStream, want uint64) error {
	s, err := js.Stream(ctx, replayStream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", replayStream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s info: %w", replayStream, err)
	}
	if info.State.Msgs != want {
		return fmt.Errorf("stream %s holds %d messages, want %d", replayStream, info.State.Msgs, want)
	}
	return nil
}

func replayRead(ctx context.Context, url string, events, payload, pullMax int) (*replayResult, error) {
	if events < 1 {
		return nil, fmt.Errorf("-events must be at least 1")
	}
	payload = max(payload, 8)
	nc, err := connect(url, "load-replay-read")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	// Stream metadata only: no message is read before the clock starts.
	if err := streamHolds(ctx, js, uint64(events)); err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, replayStream)
	if err != nil {
		return nil, err
	}

	// The handler runs on one goroutine at a time; the atomics are for the
	// reads below, which a timeout can make while it still runs.
	var next atomic.Uint64
	next.Store(1)
	var bad atomic.Pointer[error]
	done := make(chan struct{})
	handler := func(m jetstream.Msg) {
		want := next.Load()
		if bad.Load() != nil || want > uint64(events) {
			return
		}
		data := m.Data()
		var err error
		switch {
		case len(data) != payload:
			err = fmt.Errorf("message %d has %d bytes, want %d", want, len(data), payload)
		case binary.LittleEndian.Uint64(data) != want:
			err = fmt.Errorf("message %d carries stamp %d: lost, repeated or out of order", want, binary.LittleEndian.Uint64(data))
		}
		if err != nil {
			bad.Store(&err)
			close(done)
			return
		}
		next.Store(want + 1)
		if want == uint64(events) {
			close(done)
		}
	}
	var consumeErrs atomic.Int64
	var firstConsumeErr atomic.Pointer[error]
	opts := []jetstream.PullConsumeOpt{jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		consumeErrs.Add(1)
		firstConsumeErr.CompareAndSwap(nil, &err)
	})}
	if pullMax > 0 {
		opts = append(opts, jetstream.PullMaxMessages(pullMax))
	}

	t0 := time.Now()
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{replaySubject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer: %w", err)
	}
	cc, err := c.Consume(handler, opts...)
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	secs := time.Since(t0).Seconds()
	cc.Stop()
	if n := consumeErrs.Load(); n > 0 {
		logf("replay-read: %d consumer errors reported by the client, the first: %v", n, *firstConsumeErr.Load())
	}
	if err := bad.Load(); err != nil {
		return nil, *err
	}
	if got := next.Load() - 1; got != uint64(events) {
		return nil, fmt.Errorf("read %d of %d messages: %v", got, events, ctx.Err())
	}
	return &replayResult{Measure: "replay-read", Events: int64(events), Payload: payload, Secs: secs}, nil
}
