// kiln serve [--host H] [--port P] [--token-file F] [--fallback-url URL | --no-fallback] [--json]:
// the cache as a PEP 503/691 index, one sub-index per target, until SIGINT/SIGTERM; projects that
// are not kiln's are redirected upstream, so one index URL installs everything.
#include <CLI/CLI.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "cli/serve_routes.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/strings.h"
#include "doctor/doctor.h"
#include "index/commands.h"
#include "index/scan.h"
#include "index/server.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

std::string read_token(const std::string& path) {
  std::string text = read_file(absolute_path(path)).value();
  std::string token(trim(text));
  if (token.empty()) raise(Error::bad_input(cat("--token-file ", path, ": the file is empty")));
  if (token.find_first_of(" \t\r\n") != std::string::npos)
    raise(Error::bad_input(
        cat("--token-file ", path, ": the token must be one line without spaces")));
  return token;
}

// Only this machine reaches a loopback address.
bool loopback(const std::string& host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1" || host == "[::1]";
}

bool wildcard(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]";
}

// The addresses other hosts reach a wildcard listener at: every interface's that is up, IPv4 (and
// global IPv6 for "::"), not loopback or link-local. The listening address itself otherwise.
std::vector<std::string> reachable_hosts(const std::string& host) {
  if (!wildcard(host)) return {host};
  std::vector<std::string> out;
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {"127.0.0.1"};
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET6_ADDRSTRLEN] = {};
    int family = a->ifa_addr->sa_family;
    if (family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    } else if (family == AF_INET6 && host != "0.0.0.0") {
      auto* in6 = &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(in6)) continue;
      inet_ntop(AF_INET6, in6, text, sizeof text);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
  }
  freeifaddrs(list);
  if (out.empty()) out.emplace_back("127.0.0.1");
  return out;
}

std::string host_port(const std::string& host, std::uint16_t port) {
  bool ipv6 = host.find(':') != std::string::npos && !host.starts_with('[');
  return cat(ipv6 ? cat("[", host, "]") : host, ":", port);
}

struct Install {
  std::string pip, uv;  // the lines, or "" when one cannot be printed faithfully
};

// The one command per client that installs a target's projects: kiln's index alone (kiln sends
// the rest upstream); pip skips a plain-http index on another host unless it is trusted.
Install install_commands(const index::Target& t, const std::string& base, const std::string& host,
                         std::uint16_t port) {
  std::string index = cat(base, index::percent_encode(t.name), "/simple/");
  index::InstallCommands c =
      index::install_commands(t, index, loopback(host) ? "" : host_port(host, port));
  return {shell_command(c.pip).value_or(""), shell_command(c.uv).value_or("")};
}

struct Banner {
  std::vector<std::string> urls;           // base URLs, the first one used in commands
  std::map<std::string, Install> install;  // by target
};

Banner make_banner(const index::IndexModel& model, const std::string& host, std::uint16_t port) {
  Banner b;
  std::vector<std::string> hosts = reachable_hosts(host);
  for (const auto& h : hosts) b.urls.push_back(cat("http://", host_port(h, port), "/"));
  for (const auto& [name, t] : model.targets)
    b.install[name] = install_commands(t, b.urls.front(), hosts.front(), port);
  return b;
}

// --json: one line on stdout once the server answers, for scripts that start it.
void print_ready(const index::IndexModel& model, const Banner& banner, const fs::path& cache) {
  nlohmann::json indexes = nlohmann::json::object(), install = nlohmann::json::object();
  for (const auto& [name, t] : model.targets)
    indexes[name] = cat(banner.urls.front(), index::percent_encode(name), "/simple/");
  for (const auto& [name, cmd] : banner.install) install[name] = {{"pip", cmd.pip}, {"uv", cmd.uv}};
  std::cout << nlohmann::json{{"url", banner.urls.front()},
                              {"urls", banner.urls},
                              {"cache", cache.string()},
                              {"indexes", indexes},
                              {"install", install}}
                   .dump()
            << std::endl;
}

void print_banner(const index::IndexModel& model, const Banner& banner,
                  const index::Routes& routes) {
  if (banner.urls.size() > 1)
    log::info(
        cat("also reachable at ",
            join(std::vector<std::string>(banner.urls.begin() + 1, banner.urls.end()), ", ")));
  if (model.targets.empty())
    log::info("no wheels in the cache yet; builds appear here without a restart");
  for (const auto& [name, cmd] : banner.install) {
    if (cmd.pip.empty() || cmd.uv.empty())
      log::warn(cat(name, ": no install command: a word of it holds a control character"));
    for (const auto& line : {cmd.pip, cmd.uv})
      if (!line.empty()) log::info(cat(name, ": ", line));
  }
  if (routes.fallback.empty()) {
    log::info("--no-fallback: projects that are not kiln's are not found here");
    return;
  }
  std::string torch;
  for (const auto& [name, up] : routes.targets)
    if (!up.url.empty()) torch += cat("; torch for ", name, ": ", up.url);
  log::info(cat("projects that are not kiln's are sent to ", routes.fallback, torch));
}

}  // namespace

std::function<int()> configure_serve(CLI::App& sub, Context& ctx) {
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string token_file;
    unsigned threads = 0;
    std::string fallback_url;
    bool no_fallback = false;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("--host", opts->host,
                 "Address to listen on (default: 127.0.0.1, this machine only)");
  sub.add_option("--port", opts->port, "Port (default: 8000; 0: a free one)")
      ->check(CLI::Range(0, 65535));
  sub.add_option(
      "--token-file", opts->token_file,
      "Require this file's token: Authorization: Bearer, or http://kiln:TOKEN@host/ for pip/uv");
  sub.add_option("--threads", opts->threads, "Event-loop threads (default: one per core, 2 to 8)");
  auto* fallback = sub.add_option(
      "--fallback-url", opts->fallback_url,
      "Where projects that are not kiln's are redirected (default: the index kiln resolves with)");
  sub.add_flag("--no-fallback", opts->no_fallback,
               "Redirect nothing: projects that are not kiln's are not found (air-gapped hosts)")
      ->excludes(fallback);
  return [&ctx, opts] {
    install_interrupt_handlers();
    std::signal(SIGPIPE, SIG_IGN);
    index::ServerOptions so;
    so.host = opts->host;
    so.port = static_cast<std::uint16_t>(opts->port);
    so.threads = opts->threads;
    if (!opts->token_file.empty()) so.token = read_token(opts->token_file);
    if (so.token.empty() && !loopback(opts->host))
      log::warn(cat("serving on ", opts->host, " without --token-file: anyone who reaches this ",
                    "machine can download every cached wheel"));
    so.log = [](std::string_view line) { log::info(line); };
    std::optional<std::string> fallback_url;
    if (opts->no_fallback)
      fallback_url = "";
    else if (!opts->fallback_url.empty())
      fallback_url = opts->fallback_url;
    so.routes = serve_routes(ctx, fallback_url);
    // The doctor's Python half, for GPU hosts without kiln: curl -s URL/doctor.py | python3 -
    so.static_files["doctor.py"] =
        index::make_static_file("text/x-python; charset=utf-8", std::string(doctor::script()));

    index::CacheIndex cache_index(ctx.cache_path());
    auto model = cache_index.current();
    for (const auto& s : cache_index.take_new_skipped()) log::warn(cat("not served: ", s));
    auto server = index::Server::start(so, cache_index).value();
    log::info(cat("serving ", server->url(), " from ", ctx.cache_path().string()));
    Banner banner = make_banner(*model, opts->host, server->port());
    print_banner(*model, banner, so.routes);
    log::info(
        cat("on a GPU host without kiln: curl -s ", banner.urls.front(), "doctor.py | python3 -"));
    if (ctx.json) print_ready(*model, banner, ctx.cache_path());
    if (!so.token.empty())
      log::info("requests need the token (pip/uv: put it in the URL as http://kiln:TOKEN@host/)");
    while (!interrupted()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (const auto& s : cache_index.take_new_skipped()) log::warn(cat("not served: ", s));
    }
    server.reset();
    log::info("stopped");
    return 0;
  };
}

}  // namespace kiln::cli
