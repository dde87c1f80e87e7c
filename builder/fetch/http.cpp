#include "fetch/http.h"

#include "core/strings.h"

namespace kiln::fetch {

std::string HttpResponse::header(std::string_view name) const {
  std::string want = lower(name);
  for (const auto& [key, value] : headers)
    if (key == want) return value;
  return {};
}

bool HttpResponse::retryable() const {
  switch (transport) {
    case Transport::ConnectFailed:
    case Transport::TimedOut:
    case Transport::Broken:
      return true;
    case Transport::Failed:
    case Transport::TooLarge:
    case Transport::Interrupted:
      return false;
    case Transport::Ok:
      return status >= 500 || status == 429;
  }
  return false;
}

std::string HttpResponse::describe() const {
  switch (transport) {
    case Transport::Ok:
      return cat("HTTP ", status);
    case Transport::ConnectFailed:
      return cat("connection failed: ", error);
    case Transport::TimedOut:
      return cat("timed out: ", error);
    case Transport::Broken:
      return cat("transfer broke off: ", error);
    case Transport::Failed:
    case Transport::TooLarge:
      return error;
    case Transport::Interrupted:
      return "interrupted";
  }
  return error;
}

}  // namespace kiln::fetch
