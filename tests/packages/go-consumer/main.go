// Command consumer is the program tests/packages/run.sh builds in a separate module that gets
// github.com/agent-harness/agent-harness/gen/go from a module proxy, as a user's module would:
// it Starts a session on a real server, Subscribes from the start of its log until turn_end and
// checks that the answer is the expected text. Exit status 0 only then.
//
//	consumer -addr 127.0.0.1:50051 -session ID -prompt "TEXT hi" -want hi
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	pb "github.com/agent-harness/agent-harness/gen/go/agentharness/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "agent-harness address")
	session := flag.String("session", "", "session id")
	prompt := flag.String("prompt", "", "first message")
	want := flag.String("want", "", "the answer expected")
	flag.Parse()
	answer, err := run(*addr, *session, *prompt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
	if answer != *want {
		fmt.Fprintf(os.Stderr, "consumer: answer %q, want %q\n", answer, *want)
		os.Exit(1)
	}
	fmt.Printf("answer: %s\n", answer)
}

func run(addr, session, prompt string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	client := pb.NewSessionServiceClient(conn)
	ctx = metadata.AppendToOutgoingContext(ctx, "x-session-id", session)
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	if _, err := client.Start(ctx, &pb.StartRequest{
		SessionId:      session,
		Config:         &pb.StartConfig{Prompt: prompt},
		IdempotencyKey: hex.EncodeToString(key),
	}); err != nil {
		return "", fmt.Errorf("Start: %w", err)
	}
	stream, err := client.Subscribe(ctx, &pb.SubscribeRequest{SessionId: session, AfterSeq: 0})
	if err != nil {
		return "", fmt.Errorf("Subscribe: %w", err)
	}
	var text strings.Builder
	for {
		msg, err := stream.Recv()
		if err != nil {
			return "", fmt.Errorf("Subscribe: %w (answer so far %q)", err, text.String())
		}
		ev := msg.GetEvent()
		for _, block := range ev.GetContent().GetBlocks() {
			text.WriteString(block.GetText())
		}
		if end := ev.GetTurnEnd(); end != nil {
			if end.GetIsError() {
				return "", fmt.Errorf("the turn ended in an error (answer %q)", text.String())
			}
			return strings.TrimSpace(text.String()), nil
		}
	}
}
