// kiln serve [--host H] [--port P] [--token-file F] [--json]: the cache as a PEP 503/691 index, one
// sub-index per target, until SIGINT/SIGTERM.
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/strings.h"
#include "doctor/doctor.h"
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

// --json: one line on stdout once the server answers, for scripts that start it.
void print_ready(const index::IndexModel& model, const std::string& url, const fs::path& cache) {
  nlohmann::json indexes = nlohmann::json::object();
  for (const auto& [name, t] : model.targets)
    indexes[name] = cat(url, index::percent_encode(name), "/simple/");
  std::cout << nlohmann::json{{"url", url}, {"cache", cache.string()}, {"indexes", indexes}}.dump()
            << std::endl;
}

void print_targets(const index::IndexModel& model, const std::string& url) {
  if (model.targets.empty()) {
    log::info("no wheels in the cache yet; builds appear here without a restart");
    return;
  }
  for (const auto& [name, t] : model.targets) {
    std::string line =
        cat("pip install --index-url ", url, index::percent_encode(name), "/simple/");
    for (const auto& [pname, p] : t.projects)
      line += cat(" ", pname, "==", p.versions.empty() ? "" : p.versions.back());
    log::info(cat(name, ": ", line));
  }
}

}  // namespace

std::function<int()> configure_serve(CLI::App& sub, Context& ctx) {
  struct Options {
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string token_file;
    unsigned threads = 0;
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
    // The doctor's Python half, for GPU hosts without kiln: curl -s URL/doctor.py | python3 -
    so.static_files["doctor.py"] =
        index::make_static_file("text/x-python; charset=utf-8", std::string(doctor::script()));

    index::CacheIndex cache_index(ctx.cache_path());
    auto model = cache_index.current();
    for (const auto& s : cache_index.take_new_skipped()) log::warn(cat("not served: ", s));
    auto server = index::Server::start(so, cache_index).value();
    std::string url = server->url();
    log::info(cat("serving ", url, " from ", ctx.cache_path().string()));
    print_targets(*model, url);
    log::info(cat("on a GPU host without kiln: curl -s ", url, "doctor.py | python3 -"));
    if (ctx.json) print_ready(*model, url, ctx.cache_path());
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
