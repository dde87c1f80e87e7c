// Runs tests/support/http_server.py on 127.0.0.1 for the fetch tests (see that script's routes).
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"
#include "unit/source_dir.h"

namespace kiln::testing {

class HttpServer {
 public:
  // Serves `root`; the request log and port file live beside it (in `root`'s parent).
  explicit HttpServer(const std::filesystem::path& root) : root_(root) {
    port_file_ = root.parent_path() / cat(root.filename().string(), ".port");
    log_ = root.parent_path() / cat(root.filename().string(), ".log");
    std::error_code ec;
    std::filesystem::remove(port_file_, ec);
    std::filesystem::remove(log_, ec);
    ProcessSpec spec;
    spec.argv = {"python3",     kiln::test::source_dir() + "/tests/support/http_server.py",
                 "--root",      root.string(),
                 "--port-file", port_file_.string(),
                 "--log",       log_.string()};
    spec.output = ProcessSpec::Output::Discard;
    auto child = spawn(spec);
    if (!child) {
      ADD_FAILURE() << child.error().message;
      return;
    }
    child_.emplace(std::move(*child));
    for (int i = 0; i < 500 && !std::filesystem::exists(port_file_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto text = read_file(port_file_);
    if (!text) {
      ADD_FAILURE() << "the test HTTP server did not start";
      return;
    }
    port_ = std::stoi(*text);
  }

  ~HttpServer() { stop(); }

  void stop() { child_.reset(); }  // Child's destructor kills and reaps it

  std::string url(const std::string& path) const { return cat("http://127.0.0.1:", port_, path); }

  // The requests so far, one JSON object each ({"path", "range", "accept", "user_agent"}).
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    auto text = read_file(log_);
    if (!text) return out;
    for (const auto& line : split(*text, "\n")) out.push_back(nlohmann::json::parse(line));
    return out;
  }

 private:
  std::filesystem::path root_, port_file_, log_;
  std::optional<Child> child_;
  int port_ = 0;
};

// A port nothing listens on (bound, then closed again).
inline int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace kiln::testing
