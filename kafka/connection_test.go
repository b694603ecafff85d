package kafka

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
)

// TestRefusedBrokersFromTheEnvironment: a broker that refuses, whose
// address came from STREAMGEN_KAFKA_BROKERS, is an error that says so.
func TestRefusedBrokersFromTheEnvironment(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: a dial is refused
	t.Setenv(BrokersEnv, addr)
	src := Source(Options{Connection: Connection{Brokers: Brokers()}, Topics: []string{"t"}})
	defer src.Close()
	_, err = src.Available(context.Background())
	if err == nil || !strings.Contains(err.Error(), "come from $"+BrokersEnv) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Available: %v", err)
	}
	other := Source(Options{Connection: Connection{Brokers: []string{addr}}, Topics: []string{"t"}})
	defer other.Close()
	os.Unsetenv(BrokersEnv)
	if _, err := other.Available(context.Background()); err == nil || strings.Contains(err.Error(), BrokersEnv) || !strings.Contains(err.Error(), "brokers "+addr) {
		t.Fatalf("Available, brokers given: %v", err)
	}
}
