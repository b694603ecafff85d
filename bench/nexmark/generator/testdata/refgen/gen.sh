#!/bin/bash
# Regenerates the reference events in ../ from the upstream Java generator.
#
# It compiles the generator classes of nexmark/nexmark (commit 6b3646c) outside
# Flink, with the three unseeded SplittableRandoms seeded: the generator's from
# the system property "seed", BidGenerator's static one (URL cache) with 7 and
# StringsGenerator's static one (the 1 MiB extra string) with 11, as the Go
# port does. Needs a JDK (17+) and a clone or bare mirror of nexmark/nexmark:
#
#   REPO=/path/to/nexmark.git ./gen.sh
set -euo pipefail
REPO=${REPO:-/work/.mirror/nexmark+nexmark/repo}
REV=${REV:-6b3646c}
P=nexmark-flink/src/main/java/com/github/nexmark/flink
HERE=$(cd "$(dirname "$0")"; pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/src" "$W/out"
for f in model/Person.java model/Auction.java model/Bid.java model/Event.java generator/GeneratorConfig.java generator/NexmarkGenerator.java generator/model/AuctionGenerator.java generator/model/BidGenerator.java generator/model/LongGenerator.java generator/model/PersonGenerator.java generator/model/PriceGenerator.java generator/model/StringsGenerator.java; do
  mkdir -p "$W/src/$(dirname $f)"; git --git-dir="$REPO" show "$REV:$P/$f" > "$W/src/$f"
done
cd "$W/src"
sed -i 's/^import javax.annotation.Nullable;//; s/@Nullable //g' model/Event.java
sed -i 's/this.stepLengthSec = configuration.rateShape.stepLengthSec(configuration.ratePeriodSec);/this.stepLengthSec = 0;/' generator/GeneratorConfig.java
sed -i 's/^import static org.apache.flink.util.Preconditions.checkNotNull;/import static java.util.Objects.requireNonNull;/; s/checkNotNull(/requireNonNull(/g; s/new SplittableRandom()/new SplittableRandom(Long.getLong("seed", 42L))/' generator/NexmarkGenerator.java
sed -i 's/new SplittableRandom()/new SplittableRandom(7L)/' generator/model/BidGenerator.java
sed -i 's/new SplittableRandom()/new SplittableRandom(11L)/' generator/model/StringsGenerator.java
grep -q 'SplittableRandom(Long.getLong("seed", 42L))' generator/NexmarkGenerator.java
grep -q 'SplittableRandom(7L)' generator/model/BidGenerator.java
grep -q 'SplittableRandom(11L)' generator/model/StringsGenerator.java
# The fields of NexmarkConfiguration the generator reads, with upstream defaults.
cat > NexmarkConfiguration.java <<'EOT'
package com.github.nexmark.flink;
public class NexmarkConfiguration implements java.io.Serializable {
  public long numEvents = 0; public int numEventGenerators = 1; public int firstEventRate = 10000; public int nextEventRate = 10000;
  public int ratePeriodSec = 600; public boolean isRateLimited = false; public int personProportion = 1; public int auctionProportion = 3; public int bidProportion = 46;
  public int avgPersonByteSize = 200; public int avgAuctionByteSize = 500; public int avgBidByteSize = 100; public int hotAuctionRatio = 2; public int hotSellersRatio = 4; public int hotBiddersRatio = 4;
  public int numInFlightAuctions = 100; public int numActivePeople = 1000; public long occasionalDelaySec = 3; public double probDelayedEvent = 0.1; public long outOfOrderGroupSize = 1;
  public boolean isSourceKeepAlive = false; public long stopAtEvent = -1L; public boolean maxEmitSpeed = true;
}
EOT
cp "$HERE/Dump.java" .
javac -nowarn -d "$W/out" $(find . -name '*.java')
if [ -n "${DUMP_ONLY:-}" ]; then java -cp "$W/out" Dump "$@"; exit; fi
D=$HERE/..
# Default configuration, one generator, seed 42: the first 2000 events.
java -cp "$W/out" Dump events=2000 seed=42 | gzip -9n > "$D/ref-default.jsonl.gz"
# The benchmark's split layout (100M events, 10M/s, 8 generators): 500 events of
# split 7, whose seed is SplitSeed(42, 7) = 42 ^ mix64(7) (as a Java long).
java -cp "$W/out" Dump events=500 total=100000000 rate=10000000 generators=8 split=7 seed=1346066267577507646 | gzip -9n > "$D/ref-split7.jsonl.gz"
# Out-of-order groups of 7, other extra sizes (auctions get none), 3 generators:
# 300 events of split 1, seed SplitSeed(42, 1).
java -cp "$W/out" Dump events=300 total=3000 rate=1000 generators=3 split=1 seed=6238072747940578767 ooo=7 personBytes=1000 auctionBytes=20 bidBytes=300 | gzip -9n > "$D/ref-ooo.jsonl.gz"
