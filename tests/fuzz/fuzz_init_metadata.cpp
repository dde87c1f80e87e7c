// A torch wheel's METADATA as `kiln target init --torch` reads it (init/requirements.h) from a
// stranger's index, and the encoders through which any of it reaches the target file
// (init/toml_text.h). Input: the METADATA text. Invariants: what check_requires_dist lets through
// has no control character; the requirement kiln would name in the file's comment, and any text
// at all, encodes to a comment that parses as nothing and a string that parses back as itself.
#include <toml++/toml.h>

#include "core/strings.h"
#include "fuzz.h"
#include "init/requirements.h"
#include "init/toml_text.h"

using kiln::fuzz::fail;

namespace {

// `text` written as kiln writes a target: a comment line, then one string; it must parse to
// exactly the key, with `text` as its value when `text` is valid UTF-8.
void check_encoders(std::string_view text) {
  std::string doc = kiln::init::toml_comment(text) + "key = " + kiln::init::toml_string(text) +
                    "\n" + kiln::init::toml_comment(text);
  toml::parse_result parsed = toml::parse(doc);
  if (!parsed) fail("an encoded comment or string does not parse");
  const toml::table& t = parsed.table();
  if (t.size() != 1) fail("an encoded comment or string became TOML structure");
  auto value = t["key"].value<std::string>();
  if (!value) fail("the encoded string is not a string");
  if (kiln::is_valid_utf8(text) && *value != text) fail("the encoded string does not read back");
}

}  // namespace

KILN_FUZZ_TARGET(init_metadata) {
  std::string_view metadata = kiln::fuzz::text(data, size);
  auto checked = kiln::init::check_requires_dist(metadata, "https://index.test/torch.metadata");
  if (!checked) {
    if (checked.error().message.empty()) fail("an error without a message");
  } else {
    if (auto cuda = kiln::init::cuda_from_metadata(metadata)) {
      if (!kiln::control_character(cuda->source).empty()) fail("a control character let through");
      check_encoders(cuda->source);
    }
    (void)kiln::init::toolkit_components(metadata);
  }
  check_encoders(metadata.substr(0, 4096));
  return 0;
}
