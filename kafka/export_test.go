package kafka

import "github.com/twmb/franz-go/pkg/kfake"

// FakeCluster gives tests the kfake cluster under an EmbeddedCluster, to
// inject faults.
func FakeCluster(e *EmbeddedCluster) *kfake.Cluster { return e.cluster }
