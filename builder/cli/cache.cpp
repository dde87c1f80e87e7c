// kiln cache ls | verify | gc [--all | --max-size SIZE --max-age AGE]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <ctime>
#include <iostream>

#include "cache/store.h"
#include "cli/context.h"
#include "cli/table.h"
#include "core/log.h"
#include "core/strings.h"
#include "index/scan.h"

namespace kiln::cli {

namespace {

// A field of entry.json as a table shows it: "?" (or `missing`) when the entry has none.
std::string field(const std::string& value, const char* missing = "?") {
  return value.empty() ? missing : value;
}

// `kiln cache ls`: every entry with its backend and key; the ones the index serves marked.
int list_entries(const cache::Store& store, bool json) {
  auto entries = store.list();
  const std::set<std::string> served = index::served_keys(store.root());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : entries) {
      nlohmann::json j = e.info.to_json();
      j["path"] = e.wheel.string();
      j["key"] = e.key;
      j["served"] = served.count(e.key) > 0;
      out.push_back(j);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  Table table({"PACKAGE", "VERSION", "TARGET", "BACKEND", "ARCHS", "SIZE", "KEY", "SERVED"});
  for (const auto& e : entries)
    table.add({field(e.info.package), field(e.info.version), field(e.info.target),
               field(e.info.backend), field(e.info.archs, "-"), std::to_string(e.size),
               e.key.substr(0, 16), served.count(e.key) ? "*" : ""});
  std::cout << table.render();
  return 0;
}

// What `kiln cache gc` was asked for.
struct GcOptions {
  bool all = false;
  std::string max_size, max_age;  // as given ("" when not)
};

// A CLI11 check of an option's value by a parser of core/strings.h: an error is a usage error.
template <typename Parse>
CLI::Validator checked_by(Parse parse, std::string what) {
  return CLI::Validator(
      [parse, what](std::string& value) -> std::string {
        if (parse(value)) return "";
        return cat("'", printable_excerpt(value, 40), "' is not ", what);
      },
      "");
}

std::string mib(std::uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// `kiln cache gc`: staging leftovers, damaged and stale objects (with --all every entry), then
// eviction by age and size, then abandoned build roots.
int collect(const cache::Store& store, const GcOptions& o, bool json) {
  cache::GcResult removed = store.gc(o.all).value();
  cache::EvictPolicy policy;
  if (!o.max_age.empty()) policy.max_age = parse_duration(o.max_age);
  if (!o.max_size.empty()) policy.max_bytes = parse_byte_size(o.max_size);
  cache::EvictResult evicted = store.evict(policy, std::time(nullptr)).value();
  std::uint64_t freed = removed.bytes + evicted.freed_bytes;
  if (json) {
    std::cout << nlohmann::json{{"removed_items", removed.items},
                                {"removed_build_roots", removed.build_roots},
                                {"removed_wheels", evicted.removed_wheels},
                                {"removed_objects", evicted.removed_objects},
                                {"freed_bytes", freed},
                                {"remaining_bytes", evicted.remaining_bytes},
                                {"other_bytes", store.other_bytes()},
                                {"kept_locked", evicted.kept_locked}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::uint64_t items = removed.items + evicted.removed_wheels + evicted.removed_objects;
  log::info(cat("removed ", items, " items",
                removed.build_roots ? cat(" and ", removed.build_roots, " abandoned build roots")
                                    : std::string(),
                " (", mib(freed), " freed)", "; cache now ", mib(evicted.remaining_bytes),
                " of wheels and objects"));
  return 0;
}

}  // namespace

std::function<int()> configure_cache(CLI::App& sub, Context& ctx) {
  auto action = std::make_shared<std::string>();
  auto gc_options = std::make_shared<GcOptions>();
  sub.require_subcommand(1);
  CLI::App* ls = sub.add_subcommand("ls", "List the cached wheels");
  CLI::App* verify =
      sub.add_subcommand("verify", "Rehash every cached wheel and object; exit 1 on any damage");
  CLI::App* gc = sub.add_subcommand(
      "gc",
      "Remove what killed processes left (staging, build roots) and damaged objects; "
      "--max-age/--max-size: least recently used wheels and objects; --all: every one");
  gc->footer(
      "Evicted are wheel entries (wheels/) and compiled objects (objects/), by their last use in a "
      "build: first all last used longer ago than --max-age, then, least recently used first, "
      "until they take at most --max-size. Downloads, sysroots, toolkits and environments are "
      "never evicted. An entry a running build holds is kept.");
  CLI::Option* all =
      gc->add_flag("--all", gc_options->all, "Remove every cached wheel and object as well");
  auto add_limit = [gc, all](const char* name, std::string& value, const char* type,
                             const char* help, CLI::Validator check) {
    gc->add_option(name, value, help)->check(check)->type_name(type)->excludes(all);
  };
  add_limit("--max-size", gc_options->max_size, "SIZE",
            "Then remove least recently used wheels and objects until they take at most SIZE "
            "(bytes, or with K, M, G, T: powers of 1024; e.g. 500M, 20G, 1.5T)",
            checked_by(parse_byte_size,
                       "a size: bytes, or a number with K, M, G or T (e.g. 500M, 20G, 1.5T)"));
  add_limit("--max-age", gc_options->max_age, "AGE",
            "First remove wheels and objects no build used for longer than AGE (a whole number "
            "with s, m, h, d or w: 90s, 30m, 12h, 30d, 2w)",
            checked_by(parse_duration,
                       "an age: a whole number with s, m, h, d or w (e.g. 12h, 30d, 2w)"));
  for (CLI::App* s : {ls, verify, gc}) s->callback([action, s] { *action = s->get_name(); });
  return [&ctx, action, gc_options] {
    // A cache that is not there yet lists nothing (as `kiln serve` serves nothing) and has nothing
    // to collect; verify would say nothing true.
    std::error_code ec;
    if (*action == "ls" && !std::filesystem::exists(ctx.cache_path(), ec)) {
      if (ctx.json) std::cout << "[]\n";
      log::info(cat("no cache at ", ctx.cache_path().string(),
                    " yet: nothing built there (`kiln build` makes it)"));
      return 0;
    }
    cache::Store store(*action == "gc" ? ctx.cache_path() : ctx.existing_cache());
    if (*action == "ls") return list_entries(store, ctx.json);
    if (*action == "verify") {
      auto problems = store.verify();
      std::size_t n = store.list().size();
      cache::ObjectsVerified objects = store.verify_objects();
      if (ctx.json) {
        nlohmann::json out = nlohmann::json::array(), object_out = nlohmann::json::array();
        for (const auto& p : problems) out.push_back({{"key", p.key}, {"problem", p.message}});
        for (const auto& p : objects.damaged)
          object_out.push_back({{"path", p.key}, {"problem", p.message}});
        std::cout << nlohmann::json{{"entries", n},
                                    {"problems", out},
                                    {"objects", objects.checked},
                                    {"object_problems", object_out},
                                    {"stale_objects", objects.stale}}
                         .dump(2)
                  << "\n";
      }
      for (const auto& p : problems) log::error(cat("cache entry ", p.key, ": ", p.message));
      for (const auto& p : objects.damaged)
        log::error(cat("cache object ", p.key, ": ", p.message,
                       " (a build that needs it, or kiln cache gc, removes it)"));
      if (!ctx.json) {
        log::info(cat("verified ", n, " cache entries: ", problems.size(), " damaged"));
        std::string stale = objects.stale.empty()
                                ? std::string()
                                : cat(", ", objects.stale.size(),
                                      " stale (from an older kiln, never used; kiln cache gc "
                                      "removes them)");
        log::info(cat("verified ", objects.checked, " cached objects: ", objects.damaged.size(),
                      " damaged", stale));
      }
      return problems.empty() && objects.damaged.empty() ? 0 : 1;
    }
    return collect(store, *gc_options, ctx.json);
  };
}

}  // namespace kiln::cli
