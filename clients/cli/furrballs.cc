// furrballs: the command-line client of the Furrballs cache.
//
//   furrballs [flags] get KEY           print the value; exit 1 on a miss
//   furrballs [flags] set KEY [VALUE]   VALUE, or standard input if omitted
//   furrballs [flags] delete KEY
//   furrballs [flags] touch KEY         reset the TTL to --ttl_ms
//   furrballs [flags] stats             per-node statistics table
//   furrballs [flags] load              load generator
//
// Exit codes: 0 ok, 1 not found (get), 2 usage error, 3 RPC error (the status
// is printed). `--help` lists every flag with its default.
//
// Flags are parsed here rather than by absl::ParseCommandLine, which exits
// with status 1 on a bad flag: 1 means "not found" to scripts that use this
// tool, so a usage error must be 2. The flags are still absl flags (declared
// below, parsed through absl's flag reflection), and they may stand before
// or after the command.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/reflection.h>
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>

#include "clients/cli/load.h"
#include "clients/cpp/client.h"
#include "clients/cpp/cluster_client.h"
#include "engine/common/read_file.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "Server host:port. Several comma-separated endpoints form a cluster: "
          "keys are sharded by rendezvous hashing, as ClusterClient does.");
ABSL_FLAG(int64_t, timeout_ms, 1000, "Deadline of each RPC in milliseconds.");
ABSL_FLAG(int, batch_streams, 1,
          "Automatic batching: Get, Set, Delete and Touch travel in Batch "
          "messages on this many streams per server, so that load's "
          "concurrent workers share messages (clients/cpp/batcher.h); 0 "
          "sends every call as its own unary RPC. One stream batched best "
          "here (16 callers: 6 ops per message against 3 with two streams "
          "before the batcher waited for an answer's callbacks, about 15 "
          "since; docs/peers_bench.md, docs/service_bench.md).");
ABSL_FLAG(bool, tls, false,
          "Connect with TLS, trusting the system's CAs unless --tls_ca_file "
          "says otherwise. Any --tls_* file implies it.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM bundle of the CAs that may sign the server's certificate.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM client certificate chain, for a server with mTLS "
          "(--tls_client_ca_file); needs --tls_key_file.");
ABSL_FLAG(std::string, tls_key_file, "",
          "PEM private key (unencrypted) of --tls_cert_file.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the server's certificate must carry when it is not the host "
          "of --target (e.g. an IP target and a DNS-named certificate).");
ABSL_FLAG(std::string, token_file, "",
          "File whose first line is the bearer token to send, for a server "
          "with --auth_token_file (a file rather than a flag, so that the "
          "token does not show in the process list).");
ABSL_FLAG(uint64_t, ttl_ms, 0,
          "set: time to live of the value; touch: the new TTL. 0 = no expiry.");
ABSL_FLAG(bool, if_absent, false,
          "set: write only if the key is absent (else ALREADY_EXISTS, exit 3).");
ABSL_FLAG(int64_t, if_version, -1,
          "set: write only if the current version is N (else ABORTED, or "
          "NOT_FOUND if absent; exit 3). -1 = unconditional.");
ABSL_FLAG(bool, raw, false,
          "get: print the value exactly, without a trailing newline.");
ABSL_FLAG(bool, meta, false,
          "get: also print version and remaining TTL to standard error.");
ABSL_FLAG(uint64_t, ops, 100000, "load: operations in total.");
ABSL_FLAG(int, concurrency, 8,
          "load: worker threads, each with one call in flight.");
ABSL_FLAG(uint64_t, keys, 10000, "load: size of the key space.");
ABSL_FLAG(uint64_t, value_size, 100, "load: bytes per written value.");
ABSL_FLAG(double, get_ratio, 0.9,
          "load: fraction of operations that are Gets (the rest are Sets).");
ABSL_FLAG(std::string, key_prefix, "load:",
          "load: keys are <key_prefix><0..keys-1>.");
ABSL_FLAG(uint64_t, seed, 1, "load: random seed of the key and op choice.");

namespace furrballs::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitNotFound = 1;
constexpr int kExitUsage = 2;
constexpr int kExitRpcError = 3;

// Flags in the order --help shows them.
constexpr const char* kFlagOrder[] = {
    "target",        "timeout_ms",   "batch_streams",   "tls",
    "tls_ca_file",   "tls_cert_file", "tls_key_file",   "tls_server_name",
    "token_file",    "ttl_ms",       "if_absent",       "if_version",
    "raw",           "meta",         "ops",             "concurrency",
    "keys",          "value_size",   "get_ratio",       "key_prefix",
    "seed"};

constexpr char kUsage[] =
    "furrballs: command-line client of the Furrballs cache.\n"
    "\n"
    "usage: furrballs [flags] <command> [args]\n"
    "\n"
    "commands:\n"
    "  get KEY           print the value (exit 1 on a miss)\n"
    "  set KEY [VALUE]   write VALUE, or standard input when VALUE is omitted\n"
    "                    (or is \"-\"); prints the new version\n"
    "  delete KEY        remove the key; prints deleted or not found\n"
    "  touch KEY         reset the key's TTL to --ttl_ms\n"
    "  stats             per-node statistics of every --target endpoint\n"
    "  load              load generator: --ops operations from --concurrency\n"
    "                    threads over --keys keys; a progress line per second\n"
    "                    on standard error, then ops/s and p50/p99 latency\n"
    "\n"
    "exit codes: 0 ok, 1 not found (get), 2 usage error, 3 RPC error\n"
    "\n"
    "flags (may also follow the command; --name=value or --name value;\n"
    "booleans as --name or --noname):\n";

void PrintHelp() {
  std::string out = kUsage;
  for (const char* name : kFlagOrder) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    absl::StrAppend(&out, "  --", name, " (default: ", flag->DefaultValue(),
                    ")\n      ", flag->Help(), "\n");
  }
  std::fputs(out.c_str(), stdout);
}

int Usage(absl::string_view why) {
  std::fprintf(stderr, "furrballs: %s\nRun 'furrballs --help' for usage.\n",
               std::string(why).c_str());
  return kExitUsage;
}

int RpcError(absl::string_view what, const absl::Status& status) {
  std::fprintf(stderr, "furrballs: %s: %s\n", std::string(what).c_str(),
               status.ToString().c_str());
  return kExitRpcError;
}

bool IsOurFlag(const absl::CommandLineFlag* flag) {
  if (flag == nullptr) return false;
  for (const char* name : kFlagOrder) {
    if (flag->Name() == name) return true;
  }
  return false;
}

// Parses argv into flags and positional arguments. Returns an error message,
// or nullopt on success. Sets *help when --help was given.
std::optional<std::string> ParseArgs(int argc, char** argv,
                                     std::vector<std::string>* positional,
                                     bool* help) {
  bool flags_done = false;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (flags_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      positional->emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    absl::string_view body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    if (body == "help" || body == "h" || body == "helpfull") {
      *help = true;
      continue;
    }
    std::string name(body), value;
    bool has_value = false;
    if (const size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = std::string(body.substr(0, eq));
      value = std::string(body.substr(eq + 1));
      has_value = true;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (!IsOurFlag(flag) && !has_value && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (IsOurFlag(negated) && negated->IsOfType<bool>()) {
        flag = negated;
        value = "false";
        has_value = true;
      }
    }
    if (!IsOurFlag(flag)) return absl::StrCat("unknown flag '", arg, "'");
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::StrCat("flag '", arg, "' needs a value");
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", flag->Name(), "=", value, ": ", error);
    }
  }
  return std::nullopt;
}

client::CallOptions Call() {
  client::CallOptions c;
  c.timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  return c;
}

int Get(client::ClusterClient& cluster, const std::string& key) {
  absl::StatusOr<std::optional<client::Entry>> r = cluster.Get(key, Call());
  if (!r.ok()) return RpcError("get", r.status());
  if (!r->has_value()) {
    std::fprintf(stderr, "furrballs: get: not found\n");
    return kExitNotFound;
  }
  const client::Entry& e = **r;
  std::fwrite(e.value.data(), 1, e.value.size(), stdout);
  if (!absl::GetFlag(FLAGS_raw)) std::fputc('\n', stdout);
  if (absl::GetFlag(FLAGS_meta)) {
    std::fprintf(stderr, "version=%llu ttl_remaining_ms=%llu\n",
                 static_cast<unsigned long long>(e.version),
                 static_cast<unsigned long long>(e.ttl_remaining_ms));
  }
  return kExitOk;
}

int Set(client::ClusterClient& cluster, const std::string& key,
        const std::string& value) {
  client::SetOptions o;
  o.ttl_ms = absl::GetFlag(FLAGS_ttl_ms);
  const int64_t if_version = absl::GetFlag(FLAGS_if_version);
  if (absl::GetFlag(FLAGS_if_absent)) {
    o.mode = client::SetMode::kIfAbsent;
  } else if (if_version >= 0) {
    o.mode = client::SetMode::kIfVersion;
    o.expected_version = static_cast<uint64_t>(if_version);
  }
  absl::StatusOr<uint64_t> r = cluster.Set(key, value, o, Call());
  if (!r.ok()) return RpcError("set", r.status());
  std::printf("version %llu\n", static_cast<unsigned long long>(*r));
  return kExitOk;
}

int Delete(client::ClusterClient& cluster, const std::string& key) {
  absl::StatusOr<bool> r = cluster.Delete(key, Call());
  if (!r.ok()) return RpcError("delete", r.status());
  std::printf("%s\n", *r ? "deleted" : "not found");
  return kExitOk;
}

int Touch(client::ClusterClient& cluster, const std::string& key) {
  absl::Status s = cluster.Touch(key, absl::GetFlag(FLAGS_ttl_ms), Call());
  if (!s.ok()) return RpcError("touch", s);
  std::printf("ok\n");
  return kExitOk;
}

int Stats(client::ClusterClient& cluster) {
  int rc = kExitOk;
  bool first = true;
  for (const client::EndpointStats& es : cluster.Stats(Call())) {
    if (!es.nodes.ok()) {
      rc = RpcError(absl::StrCat("stats ", es.endpoint), es.nodes.status());
      continue;
    }
    if (!first) std::printf("\n");
    first = false;
    std::printf("endpoint %s\n", es.endpoint.c_str());
    std::printf("%4s %12s %12s %12s %12s %10s %10s %10s %10s %12s %12s %6s\n",
                "node", "hits_local", "hits_remote", "misses", "sets",
                "deletes", "evictions", "expired", "live_keys", "live_bytes",
                "limit_bytes", "hit%");
    client::NodeStats total;
    for (const client::NodeStats& n : *es.nodes) {
      const uint64_t hits = n.hits_local() + n.hits_remote();
      const uint64_t reads = hits + n.misses();
      std::printf(
          "%4u %12llu %12llu %12llu %12llu %10llu %10llu %10llu %10llu "
          "%12llu %12llu %6.1f\n",
          n.node(), static_cast<unsigned long long>(n.hits_local()),
          static_cast<unsigned long long>(n.hits_remote()),
          static_cast<unsigned long long>(n.misses()),
          static_cast<unsigned long long>(n.sets()),
          static_cast<unsigned long long>(n.deletes()),
          static_cast<unsigned long long>(n.evictions()),
          static_cast<unsigned long long>(n.expirations()),
          static_cast<unsigned long long>(n.live_keys()),
          static_cast<unsigned long long>(n.live_bytes()),
          static_cast<unsigned long long>(n.memory_limit_bytes()),
          reads == 0 ? 0.0 : 100.0 * hits / reads);
      total.set_hits_local(total.hits_local() + n.hits_local());
      total.set_hits_remote(total.hits_remote() + n.hits_remote());
      total.set_misses(total.misses() + n.misses());
      total.set_sets(total.sets() + n.sets());
      total.set_deletes(total.deletes() + n.deletes());
      total.set_evictions(total.evictions() + n.evictions());
      total.set_expirations(total.expirations() + n.expirations());
      total.set_live_keys(total.live_keys() + n.live_keys());
      total.set_live_bytes(total.live_bytes() + n.live_bytes());
      total.set_memory_limit_bytes(total.memory_limit_bytes() +
                                   n.memory_limit_bytes());
    }
    const uint64_t hits = total.hits_local() + total.hits_remote();
    const uint64_t reads = hits + total.misses();
    std::printf(
        "%4s %12llu %12llu %12llu %12llu %10llu %10llu %10llu %10llu %12llu "
        "%12llu %6.1f\n",
        "all", static_cast<unsigned long long>(total.hits_local()),
        static_cast<unsigned long long>(total.hits_remote()),
        static_cast<unsigned long long>(total.misses()),
        static_cast<unsigned long long>(total.sets()),
        static_cast<unsigned long long>(total.deletes()),
        static_cast<unsigned long long>(total.evictions()),
        static_cast<unsigned long long>(total.expirations()),
        static_cast<unsigned long long>(total.live_keys()),
        static_cast<unsigned long long>(total.live_bytes()),
        static_cast<unsigned long long>(total.memory_limit_bytes()),
        reads == 0 ? 0.0 : 100.0 * hits / reads);
  }
  return rc;
}

int Load(client::ClusterClient& cluster) {
  LoadOptions o;
  o.ops = absl::GetFlag(FLAGS_ops);
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.keys = absl::GetFlag(FLAGS_keys);
  o.value_size = absl::GetFlag(FLAGS_value_size);
  o.get_ratio = absl::GetFlag(FLAGS_get_ratio);
  o.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.call = Call();
  if (o.concurrency < 1) return Usage("--concurrency must be at least 1");
  if (o.keys < 1) return Usage("--keys must be at least 1");
  if (!(o.get_ratio >= 0.0 && o.get_ratio <= 1.0)) {
    return Usage("--get_ratio must be between 0 and 1");
  }
  std::fprintf(stderr,
               "load: %llu ops, concurrency %d, %llu keys, %llu-byte values, "
               "get ratio %.2f, against %s\n",
               static_cast<unsigned long long>(o.ops), o.concurrency,
               static_cast<unsigned long long>(o.keys),
               static_cast<unsigned long long>(o.value_size), o.get_ratio,
               absl::GetFlag(FLAGS_target).c_str());
  uint64_t last_done = 0;
  double last_t = 0;
  LoadReport r = RunLoad(cluster, o, [&](const LoadProgress& p) {
    const double rate =
        p.elapsed_s > last_t ? (p.done - last_done) / (p.elapsed_s - last_t)
                             : 0;
    std::fprintf(stderr,
                 "load: %6.1f s  %llu/%llu ops (%.0f%%)  %.0f ops/s  "
                 "%llu errors\n",
                 p.elapsed_s, static_cast<unsigned long long>(p.done),
                 static_cast<unsigned long long>(o.ops),
                 o.ops == 0 ? 100.0 : 100.0 * p.done / o.ops, rate,
                 static_cast<unsigned long long>(p.errors));
    last_done = p.done;
    last_t = p.elapsed_s;
  });
  std::fputs(FormatReport(r).c_str(), stdout);
  return r.errors == 0 ? kExitOk : kExitRpcError;
}

// Fills the TLS credentials and the bearer token from the flags; a usage
// error (exit 2) when a file cannot be used.
std::optional<int> Security(client::ClientOptions* options) {
  const std::string ca = absl::GetFlag(FLAGS_tls_ca_file);
  const std::string cert = absl::GetFlag(FLAGS_tls_cert_file);
  const std::string key = absl::GetFlag(FLAGS_tls_key_file);
  const std::string server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (absl::GetFlag(FLAGS_tls) || !ca.empty() || !cert.empty() ||
      !key.empty() || !server_name.empty()) {
    auto credentials = client::TlsCredentialsFromFiles(ca, cert, key);
    if (!credentials.ok()) {
      return Usage(absl::StrCat("--tls_*: ", credentials.status().message()));
    }
    options->credentials = *std::move(credentials);
    options->tls_server_name = server_name;
  }
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (token_file.empty()) return std::nullopt;
  absl::StatusOr<std::string> text = ReadFileToString(token_file);
  if (!text.ok()) {
    return Usage(absl::StrCat("--token_file: ", text.status().message()));
  }
  const absl::string_view token = absl::StripAsciiWhitespace(
      absl::string_view(*text).substr(0, text->find('\n')));
  if (token.empty()) {
    return Usage(absl::StrCat("--token_file: ", token_file,
                              " is empty; expected the bearer token"));
  }
  options->bearer_token = std::string(token);
  return std::nullopt;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args;
  bool help = false;
  if (std::optional<std::string> error = ParseArgs(argc, argv, &args, &help)) {
    return Usage(*error);
  }
  if (help) {
    PrintHelp();
    return kExitOk;
  }
  if (args.empty()) return Usage("no command given");
  const std::string command = args[0];
  const size_t nargs = args.size() - 1;
  auto want = [&](size_t lo, size_t hi) -> std::optional<int> {
    if (nargs < lo || nargs > hi) {
      return Usage(absl::StrCat("'", command, "' takes ",
                                lo == hi ? absl::StrCat(lo)
                                         : absl::StrCat(lo, " or ", hi),
                                " argument(s), got ", nargs));
    }
    return std::nullopt;
  };
  std::optional<int> bad;
  if (command == "get" || command == "delete" || command == "touch") {
    bad = want(1, 1);
  } else if (command == "set") {
    bad = want(1, 2);
  } else if (command == "stats" || command == "load") {
    bad = want(0, 0);
  } else {
    return Usage(absl::StrCat("unknown command '", command, "'"));
  }
  if (bad) return *bad;
  if (absl::GetFlag(FLAGS_timeout_ms) < 0) {
    return Usage("--timeout_ms must not be negative");
  }
  if (absl::GetFlag(FLAGS_if_absent) && absl::GetFlag(FLAGS_if_version) >= 0) {
    return Usage("--if_absent and --if_version exclude each other");
  }

  std::vector<std::string> endpoints =
      absl::StrSplit(absl::GetFlag(FLAGS_target), ',', absl::SkipWhitespace());
  client::ClusterOptions options;
  options.client.default_timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  if (std::optional<int> bad_security = Security(&options.client)) {
    return *bad_security;
  }
  options.client.batch_streams = absl::GetFlag(FLAGS_batch_streams);
  if (options.client.batch_streams < 0) {
    return Usage("--batch_streams must be 0 or more");
  }
  absl::StatusOr<std::unique_ptr<client::ClusterClient>> cluster =
      client::ClusterClient::FromEndpoints(endpoints, options);
  if (!cluster.ok()) {
    return Usage(absl::StrCat("--target: ", cluster.status().message()));
  }
  client::ClusterClient& c = **cluster;

  if (command == "get") return Get(c, args[1]);
  if (command == "delete") return Delete(c, args[1]);
  if (command == "touch") return Touch(c, args[1]);
  if (command == "stats") return Stats(c);
  if (command == "load") return Load(c);
  // set
  std::string value;
  if (nargs == 2 && args[2] != "-") {
    value = args[2];
  } else {
    value.assign(std::istreambuf_iterator<char>(std::cin),
                 std::istreambuf_iterator<char>());
  }
  return Set(c, args[1], value);
}

}  // namespace
}  // namespace furrballs::cli

int main(int argc, char** argv) { return furrballs::cli::Main(argc, argv); }
