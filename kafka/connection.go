package kafka

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokersEnv is the environment variable Brokers reads: a comma-separated
// list of seed brokers, host:port each.
const BrokersEnv = "STREAMGEN_KAFKA_BROKERS"

// Brokers returns the seed brokers listed in the environment variable
// STREAMGEN_KAFKA_BROKERS (comma-separated, blanks around each ignored), or
// nil when it is unset or lists none: a program then runs on Embedded. It
// is safe for concurrent use.
func Brokers() []string { return envList(BrokersEnv) }

// envList returns the comma-separated items of the environment variable
// name, blanks around each dropped, or nil when it lists none.
func envList(name string) []string {
	var items []string
	for _, item := range strings.Split(os.Getenv(name), ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// Connection says how to reach a Kafka cluster. Sources, sinks and the
// dead-letter topic each make their own franz-go client from it, so one
// Connection may serve any number of them, concurrently.
type Connection struct {
	// Brokers are the seed brokers, host:port each. Required.
	Brokers []string
	// ClientOptions are franz-go client options applied after streamgen's
	// own, so they may override them: TLS (kgo.DialTLSConfig), SASL
	// (kgo.SASL), timeouts, a logger. Options that make a client consume
	// or produce transactionally are not for here: a source issues its
	// own fetch requests, and a sink sets what its idempotence needs.
	ClientOptions []kgo.Opt
}

func (c Connection) validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no Brokers (see Embedded, and Brokers for the environment)"))
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, fmt.Errorf("Brokers[%d] is blank", i))
		}
	}
	return errors.Join(errs...)
}

// explain adds, to an error that reaching the brokers failed, which
// brokers they were and where their addresses came from, when that was
// STREAMGEN_KAFKA_BROKERS: the usual cause is a variable left set.
func (c Connection) explain(err error) error {
	var dial *net.OpError
	if err == nil || !errors.As(err, &dial) {
		return err
	}
	if env := os.Getenv(BrokersEnv); env != "" && slices.Equal(c.Brokers, Brokers()) {
		return fmt.Errorf("%w (the brokers %s come from $%s: correct it, or unset it for the in-process cluster a program starts without it)", err, env, BrokersEnv)
	}
	return fmt.Errorf("%w (brokers %s)", err, strings.Join(c.Brokers, ","))
}

// newClient makes a client for c: streamgen's options, then the user's.
func (c Connection) newClient(own ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID("streamgen")}, own...)
	opts = append(opts, c.ClientOptions...)
	return kgo.NewClient(opts...)
}
