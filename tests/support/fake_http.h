// An in-memory HttpClient for the fetch tests: scripted answers per URL, every request recorded.
#pragma once

#include <deque>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/strings.h"
#include "fetch/http.h"

namespace kiln::testing {

struct FakeAnswer {
  long status = 200;
  std::string body;
  fetch::Transport transport = fetch::Transport::Ok;
  std::size_t cut = std::string::npos;  // deliver only this many body bytes, then break off
  bool ranges = true;                   // answer "Range: bytes=N-" with 206
  fetch::Headers headers;
};

struct FakeRequest {
  std::string url;
  std::uint64_t offset = 0;  // download(): the Range asked for
  fetch::Headers headers;    // get(): the request headers
  bool download = false;
};

class FakeHttp final : public fetch::HttpClient {
 public:
  // Answers for `url`, used in order; the last one repeats.
  void add(const std::string& url, FakeAnswer answer) {
    answers_[url].push_back(std::move(answer));
  }
  void reset(const std::string& url) { answers_.erase(url); }

  std::vector<FakeRequest> requests;

  fetch::HttpResponse download(const std::string& url, const std::filesystem::path& file,
                               std::uint64_t offset, std::uint64_t max_bytes) override {
    requests.push_back({url, offset, {}, true});
    FakeAnswer a = next(url);
    fetch::HttpResponse r = start(url, a);
    if (a.transport != fetch::Transport::Ok && a.cut == std::string::npos) return r;
    std::string body = a.body;
    bool append = false;
    if (a.status == 200 && offset > 0 && a.ranges) {
      if (offset >= a.body.size()) {
        r.status = 416;
        return r;
      }
      r.status = 206;
      r.headers.push_back(
          {"content-range", cat("bytes ", offset, "-", a.body.size() - 1, "/", a.body.size())});
      body = a.body.substr(offset);
      append = true;
    }
    if (r.status < 200 || r.status >= 300) return r;
    if ((append ? offset : 0) + std::min(body.size(), a.cut) > max_bytes) {
      r.transport = fetch::Transport::TooLarge;
      r.error = "fake: over the limit";
      return r;
    }
    if (append) std::filesystem::resize_file(file, offset);
    std::ofstream out(
        file, append ? std::ios::binary | std::ios::app : std::ios::binary | std::ios::trunc);
    std::size_t n = std::min(body.size(), a.cut);
    out.write(body.data(), static_cast<std::streamsize>(n));
    r.bytes = n;
    if (n < body.size()) {
      r.transport = fetch::Transport::Broken;
      r.error = "fake: cut short";
    }
    return r;
  }

  fetch::HttpResponse put(const std::string& url, std::string_view body,
                          const fetch::Headers& request_headers) override {
    requests.push_back({url, 0, request_headers, false});
    puts[url] = std::string(body);
    return start(url, next(url));
  }
  std::map<std::string, std::string> puts;  // what put() sent, per URL

  fetch::HttpResponse get(const std::string& url, const fetch::Headers& request_headers) override {
    requests.push_back({url, 0, request_headers, false});
    FakeAnswer a = next(url);
    fetch::HttpResponse r = start(url, a);
    if (r.transport == fetch::Transport::Ok) r.body = a.body;
    return r;
  }

 private:
  FakeAnswer next(const std::string& url) {
    auto it = answers_.find(url);
    if (it == answers_.end() || it->second.empty())
      return FakeAnswer{404, "", fetch::Transport::Ok};
    FakeAnswer a = it->second.front();
    if (it->second.size() > 1) it->second.pop_front();
    return a;
  }

  static fetch::HttpResponse start(const std::string& url, const FakeAnswer& a) {
    fetch::HttpResponse r;
    r.transport = a.transport;
    r.status = a.transport == fetch::Transport::Ok || a.cut != std::string::npos ? a.status : 0;
    r.final_url = url;
    r.headers = a.headers;
    if (a.transport != fetch::Transport::Ok) r.error = "fake failure";
    return r;
  }

  std::map<std::string, std::deque<FakeAnswer>> answers_;
};

}  // namespace kiln::testing
