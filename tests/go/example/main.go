// Command example starts an agent-harness session and prints its first answer, following the
// session's log from the start. It is the Go example of docs/clients.md; tests/go runs it
// against a real server (TestDocsExample).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// newKey returns a fresh idempotency key: one per logical call, reused on its retries.
func newKey() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		log.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// retry calls call again while it fails with UNAVAILABLE (at most 4 tries). The request, and so
// its idempotency key, stays the same: a call that did land is answered with its first response.
func retry[T any](call func() (T, error)) (res T, err error) {
	for attempt := range 4 {
		if res, err = call(); status.Code(err) != codes.Unavailable {
			return res, err
		}
		time.Sleep(time.Duration(200<<attempt) * time.Millisecond)
	}
	return res, err
}

// forSession names the session in the x-session-id header of every call made with the returned
// context, so a balancer in front of several nodes sends all of the session's calls alike (the
// server refuses a header that disagrees with the request's session_id).
func forSession(ctx context.Context, session string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-session-id", session)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "agent-harness address")
	session := flag.String("session", "demo", "session id")
	prompt := flag.String("prompt", "Hello", "first message")
	flag.Parse()

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewSessionServiceClient(conn)
	ctx := forSession(context.Background(), *session)

	start := &pb.StartRequest{
		SessionId:      *session,
		Config:         &pb.StartConfig{Prompt: *prompt},
		IdempotencyKey: newKey(),
	}
	if _, err := retry(func() (*pb.StartResponse, error) { return client.Start(ctx, start) }); err != nil {
		log.Fatal(err)
	}
	// after_seq 0: the whole log, then live. Keep the last seq you saw to resume later.
	stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionId: *session, AfterSeq: 0})
	if err != nil {
		log.Fatal(err)
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			log.Fatal(err)
		}
		ev := msg.GetEvent() // nil for the replay header, caught_up and heartbeats
		if ev.GetTruncated() != nil {
			// Too large to stream whole (over the server's --max-event-bytes): it came cut
			// down, and the server keeps the whole event. Fetch it in chunks.
			if ev, err = readFullEvent(ctx, client, *session, ev.GetSeq()); err != nil {
				log.Fatal(err)
			}
		}
		for _, block := range ev.GetContent().GetBlocks() {
			fmt.Print(block.GetText())
		}
		if ev.GetTurnEnd() != nil {
			fmt.Println()
			return
		}
	}
}

// readFullEvent fetches the whole stored form of event seq with ReadFullEvent.
func readFullEvent(ctx context.Context, client pb.SessionServiceClient, session string, seq uint64) (*pb.Event, error) {
	stream, err := client.ReadFullEvent(ctx, &pb.ReadFullEventRequest{
		SessionId: session, Seq: seq, Part: pb.FullEventPart_FULL_EVENT_PART_EVENT,
	})
	if err != nil {
		return nil, err
	}
	var whole []byte
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		whole = append(whole, chunk.GetChunk()...)
	}
	ev := &pb.Event{}
	return ev, proto.Unmarshal(whole, ev)
}
