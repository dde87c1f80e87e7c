#include "core/error.h"

namespace kiln {

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::BadInput:
      return 2;
    case ErrorKind::Failed:
      return 1;
    case ErrorKind::Interrupted:
      return 130;
  }
  return 1;
}

Error Error::bad_input(std::string message, std::string detail) {
  return Error{ErrorKind::BadInput, std::move(message), std::move(detail)};
}
Error Error::failed(std::string message, std::string detail) {
  return Error{ErrorKind::Failed, std::move(message), std::move(detail)};
}
Error Error::interrupted(std::string message) {
  return Error{ErrorKind::Interrupted, std::move(message), {}};
}

void raise(Error error) {
  throw KilnError(std::move(error));
}

}  // namespace kiln
