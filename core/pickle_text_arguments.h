// The arguments of pickle protocols 0 and 1, written as text lines (INT, LONG, FLOAT, UNICODE,
// STRING, PUT, GET): numbers and Python's string escapes decoded without calling Python.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace attnscope::pickle {

// Text that no Python pickler writes; the unpickler reports it with the opcode's offset.
class MalformedText : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "123", "-5", "123L" (LONG's Python 2 suffix) as int64; false when the number does not fit
// (Python ints are unbounded). Throws MalformedText for anything but digits.
bool parse_text_integer(std::string text, int64_t& value);

// FLOAT's argument, as repr writes it.
double parse_text_float(const std::string& text);

// UNICODE: Python's raw-unicode-escape (latin-1 bytes, \uXXXX and \UXXXXXXXX) to UTF-8.
std::string decode_raw_unicode_escape(const std::string& text);

// STRING: a quoted Python 2 str with the escapes of its repr.
std::string decode_quoted_string(const std::string& text);

}  // namespace attnscope::pickle
