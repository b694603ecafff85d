package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// EmbeddedOption configures Embedded.
type EmbeddedOption interface{ applyEmbedded(*embeddedConfig) }

type embeddedOptionFunc func(*embeddedConfig)

func (f embeddedOptionFunc) applyEmbedded(c *embeddedConfig) { f(c) }

type embeddedConfig struct {
	listen   string
	brokers  int
	seeds    []kfake.Opt
	fake     []kfake.Opt
	registry bool
}

// ListenAddr has the embedded brokers listen on addr, a loopback
// host:port such as "127.0.0.1:0" (any free port), "127.0.0.1:9092" or
// "[::1]:0", so that any Kafka client on this machine (kcat, a Java
// client) can use them too. A fixed port needs NumBrokers(1). The default
// is "127.0.0.1:0". Addresses other than loopback are refused: the
// embedded broker has no authentication unless FakeOptions adds it.
func ListenAddr(addr string) EmbeddedOption {
	return embeddedOptionFunc(func(c *embeddedConfig) { c.listen = addr })
}

// NumBrokers sets how many brokers the embedded cluster has, each on its
// own port; partitions' leaders are spread over them. The default is 1.
func NumBrokers(n int) EmbeddedOption {
	return embeddedOptionFunc(func(c *embeddedConfig) { c.brokers = n })
}

// SeedTopics creates topics with the given number of partitions when the
// cluster starts. It may be given more than once.
func SeedTopics(partitions int32, topics ...string) EmbeddedOption {
	return embeddedOptionFunc(func(c *embeddedConfig) {
		c.seeds = append(c.seeds, kfake.SeedTopics(partitions, topics...))
	})
}

// FakeOptions passes options to franz-go's kfake cluster as they are
// (SASL users, TLS, broker configs, a data directory), after streamgen's.
func FakeOptions(opts ...kfake.Opt) EmbeddedOption {
	return embeddedOptionFunc(func(c *embeddedConfig) { c.fake = append(c.fake, opts...) })
}

// SchemaRegistry starts a schema registry beside the cluster, in the same
// process, on a loopback port: franz-go's srfake, which speaks Confluent
// Schema Registry's REST API (schemas by subject, version and id) and
// keeps them in memory. Registry returns a client of it, RegistryURL its
// address, for a sink's ConfluentJSON format or any registry client.
func SchemaRegistry() EmbeddedOption {
	return embeddedOptionFunc(func(c *embeddedConfig) { c.registry = true })
}

func (c *embeddedConfig) validate() error {
	var errs []error
	if c.brokers < 1 {
		errs = append(errs, fmt.Errorf("NumBrokers %d is not positive", c.brokers))
	}
	host, port, err := net.SplitHostPort(c.listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("ListenAddr %q: %w", c.listen, err))
	} else {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			errs = append(errs, fmt.Errorf("ListenAddr %q: %q is not a loopback address", c.listen, host))
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil {
			errs = append(errs, fmt.Errorf("ListenAddr %q: port %q is not a number from 0 to 65535", c.listen, port))
		} else if n != 0 && c.brokers > 1 {
			errs = append(errs, fmt.Errorf("ListenAddr %q: a fixed port serves one broker, not NumBrokers %d", c.listen, c.brokers))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: embedded kafka: options: %w", err)
	}
	return nil
}

// EmbeddedCluster is an in-process Kafka cluster: franz-go's kfake, which
// speaks the Kafka protocol (produce, fetch, transactions, groups, admin)
// on loopback ports, keeping its logs in memory unless FakeOptions gives
// it a data directory; with SchemaRegistry, a schema registry beside it.
// It is for tests, demonstrations and single-process programs; it is not
// a durable store. Its methods are safe for concurrent use.
type EmbeddedCluster struct {
	cluster  *kfake.Cluster
	brokers  []string
	registry *srfake.Registry // with SchemaRegistry
	// detach stops ctx's closing of the cluster once Close has run.
	detach    func() bool
	closeOnce sync.Once
}

// Embedded starts an in-process Kafka cluster (see EmbeddedCluster) and
// returns it once its brokers listen. The cluster stops when ctx is done
// or Close is called, whichever comes first.
func Embedded(ctx context.Context, opts ...EmbeddedOption) (*EmbeddedCluster, error) {
	cfg := embeddedConfig{listen: "127.0.0.1:0", brokers: 1}
	for _, o := range opts {
		o.applyEmbedded(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("streamgen: embedded kafka: %w", err)
	}
	listen := cfg.listen
	fakeOpts := []kfake.Opt{
		kfake.NumBrokers(cfg.brokers),
		// kfake asks for 127.0.0.1 and a port; the address chosen
		// here replaces it.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, listen) }),
	}
	fakeOpts = append(fakeOpts, cfg.seeds...)
	fakeOpts = append(fakeOpts, cfg.fake...)
	cluster, err := kfake.NewCluster(fakeOpts...)
	if err != nil {
		return nil, fmt.Errorf("streamgen: embedded kafka: %w", err)
	}
	e := &EmbeddedCluster{cluster: cluster, brokers: cluster.ListenAddrs()}
	if cfg.registry {
		if e.registry, err = startRegistry(); err != nil {
			cluster.Close()
			return nil, fmt.Errorf("streamgen: embedded schema registry: %w", err)
		}
	}
	e.detach = context.AfterFunc(ctx, e.shutdown)
	return e, nil
}

// Brokers returns the addresses the cluster's brokers listen on, for
// Connection.Brokers or any other Kafka client.
func (e *EmbeddedCluster) Brokers() []string { return append([]string(nil), e.brokers...) }

// Connection returns a Connection to the cluster.
func (e *EmbeddedCluster) Connection() Connection { return Connection{Brokers: e.Brokers()} }

// startRegistry starts srfake's registry, which panics when it cannot
// listen.
func startRegistry() (r *srfake.Registry, err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", p)
			}
		}
	}()
	return srfake.New(), nil
}

// RegistryURL returns the address of the cluster's schema registry, or ""
// without SchemaRegistry.
func (e *EmbeddedCluster) RegistryURL() string {
	if e.registry == nil {
		return ""
	}
	return e.registry.URL()
}

// Registry returns a new client of the cluster's schema registry, or nil
// without SchemaRegistry.
func (e *EmbeddedCluster) Registry() *sr.Client {
	if e.registry == nil {
		return nil
	}
	client, err := sr.NewClient(sr.URLs(e.registry.URL()))
	if err != nil {
		panic(fmt.Errorf("streamgen: embedded schema registry: %w", err)) // an http URL made by httptest: never
	}
	return client
}

// Close stops the cluster (and its schema registry): it stops
// listening, and its connections and logs are gone. Close waits only for
// the registry's requests in progress (an HTTP server's Close, which also
// closes the idle connections of the process's default HTTP transport);
// Kafka clients still connected see their requests fail. Calling it
// again does nothing.
func (e *EmbeddedCluster) Close() {
	e.detach()
	e.shutdown()
}

func (e *EmbeddedCluster) shutdown() {
	e.closeOnce.Do(func() {
		e.cluster.Close()
		if e.registry != nil {
			e.registry.Close()
		}
	})
}
