// Dump prints events of the upstream nexmark/nexmark generator (compiled by
// gen.sh with seeded RNGs) as JSON lines, for the Go port's reference test.
//
// Usage: java -cp OUT Dump key=value...   keys: events (to print), total
// (Config.Events), rate, generators, split, seed (of this split's RNG),
// base (baseTime, epoch ms), ooo (outOfOrderGroupSize), personBytes,
// auctionBytes, bidBytes. The first line echoes the configuration; each
// further line is {"person":{...}}, {"auction":{...}} or {"bid":{...}}
// with times as epoch milliseconds.
import com.github.nexmark.flink.NexmarkConfiguration;
import com.github.nexmark.flink.generator.*;
import com.github.nexmark.flink.model.*;
import java.io.*;
import java.util.*;

public class Dump {
  static void str(StringBuilder sb, String k, String v) {
    sb.append('"').append(k).append("\":\"");
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if (c == '"' || c == '\\') sb.append('\\').append(c);
      else if (c < 0x20 || c > 0x7e) sb.append(String.format("\\u%04x", (int) c));
      else sb.append(c);
    }
    sb.append("\",");
  }
  static void num(StringBuilder sb, String k, long v) {
    sb.append('"').append(k).append("\":").append(v).append(',');
  }
  static void end(StringBuilder sb) { sb.setLength(sb.length() - 1); sb.append("}}\n"); }

  public static void main(String[] args) throws IOException {
    Map<String, Long> a = new HashMap<>();
    for (String s : args) { String[] kv = s.split("=", 2); a.put(kv[0], Long.parseLong(kv[1])); }
    long events = a.getOrDefault("events", 2000L), total = a.getOrDefault("total", 0L);
    int gens = a.getOrDefault("generators", 1L).intValue(), split = a.getOrDefault("split", 0L).intValue();
    long seed = a.getOrDefault("seed", 42L), base = a.getOrDefault("base", 1767225600000L);
    NexmarkConfiguration c = new NexmarkConfiguration();
    c.firstEventRate = c.nextEventRate = a.getOrDefault("rate", 10000L).intValue();
    c.numEventGenerators = gens;
    c.outOfOrderGroupSize = a.getOrDefault("ooo", 1L);
    c.avgPersonByteSize = a.getOrDefault("personBytes", 200L).intValue();
    c.avgAuctionByteSize = a.getOrDefault("auctionBytes", 500L).intValue();
    c.avgBidByteSize = a.getOrDefault("bidBytes", 100L).intValue();
    GeneratorConfig gc = new GeneratorConfig(c, base, 1, total, -1L, 1);
    GeneratorConfig sc = gc.split(gens).get(split);
    sc = sc.reconfigure(sc, true);
    System.setProperty("seed", Long.toString(seed)); // read by NexmarkGenerator's RNG initialiser
    NexmarkGenerator g = new NexmarkGenerator(sc);
    PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, "UTF-8");
    StringBuilder sb = new StringBuilder();
    sb.append("{\"config\":{");
    num(sb, "events", events); num(sb, "total", total); num(sb, "rate", c.firstEventRate);
    num(sb, "generators", gens); num(sb, "split", split); num(sb, "seed", seed); num(sb, "base", base);
    num(sb, "ooo", c.outOfOrderGroupSize); num(sb, "personBytes", c.avgPersonByteSize);
    num(sb, "auctionBytes", c.avgAuctionByteSize); num(sb, "bidBytes", c.avgBidByteSize);
    num(sb, "firstEventId", sc.firstEventId); num(sb, "maxEvents", sc.maxEvents);
    end(sb); out.print(sb);
    for (long i = 0; i < events && g.hasNext(); i++) {
      Event e = g.next().event;
      sb.setLength(0);
      if (e.newPerson != null) {
        Person p = e.newPerson;
        sb.append("{\"person\":{");
        num(sb, "id", p.id); str(sb, "name", p.name); str(sb, "emailAddress", p.emailAddress);
        str(sb, "creditCard", p.creditCard); str(sb, "city", p.city); str(sb, "state", p.state);
        num(sb, "dateTime", p.dateTime.toEpochMilli()); str(sb, "extra", p.extra);
      } else if (e.newAuction != null) {
        Auction x = e.newAuction;
        sb.append("{\"auction\":{");
        num(sb, "id", x.id); str(sb, "itemName", x.itemName); str(sb, "description", x.description);
        num(sb, "initialBid", x.initialBid); num(sb, "reserve", x.reserve);
        num(sb, "dateTime", x.dateTime.toEpochMilli()); num(sb, "expires", x.expires.toEpochMilli());
        num(sb, "seller", x.seller); num(sb, "category", x.category); str(sb, "extra", x.extra);
      } else {
        Bid b = e.bid;
        sb.append("{\"bid\":{");
        num(sb, "auction", b.auction); num(sb, "bidder", b.bidder); num(sb, "price", b.price);
        str(sb, "channel", b.channel); str(sb, "url", b.url);
        num(sb, "dateTime", b.dateTime.toEpochMilli()); str(sb, "extra", b.extra);
      }
      end(sb); out.print(sb);
    }
    out.flush();
  }
}
