#include "ir/lexer.h"

#include <fmt/format.h>

#include "ir/error.h"

namespace mlpc::ir {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }

// Non-printable bytes are shown escaped so the message stays one readable line.
std::string show_char(char c) {
  auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
}

}  // namespace

std::string describe(const Token& t) {
  return t.kind == Tok::End ? "end of file" : fmt::format("'{}'", t.text);
}

void error_at(std::string_view file, SourceLoc at, std::string_view message) {
  // A message quotes tokens, and a token can be megabytes long: keep the line readable.
  constexpr size_t kMaxMessage = 300;
  std::string_view more = message.size() > kMaxMessage ? "..." : "";
  throw Error(fmt::format("{}:{}:{}: error: {}{}", file, at.line, at.col,
                          message.substr(0, kMaxMessage), more));
}

void Lexer::skip_space_and_comments() {
  while (pos_ < src_.size()) {
    char c = src_[pos_];
    if (c == '\n') {
      ++pos_;
      ++loc_.line;
      loc_.col = 1;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
      ++loc_.col;
    } else if (c == '#') {
      while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
    } else {
      return;
    }
  }
}

size_t Lexer::name_length(size_t from) const {
  size_t n = 0;
  while (is_name_char(at(from + n))) ++n;
  return n;
}

Token Lexer::take(Tok kind, size_t len) {
  Token t{kind, src_.substr(pos_, len), loc_};
  pos_ += len;
  loc_.col += static_cast<int>(len);
  return t;
}

Token Lexer::next() {
  skip_space_and_comments();
  if (pos_ >= src_.size()) return Token{Tok::End, {}, loc_};
  char c = src_[pos_];
  switch (c) {
    case '(': return take(Tok::LParen, 1);
    case ')': return take(Tok::RParen, 1);
    case '{': return take(Tok::LBrace, 1);
    case '}': return take(Tok::RBrace, 1);
    case '[': return take(Tok::LBracket, 1);
    case ']': return take(Tok::RBracket, 1);
    case ',': return take(Tok::Comma, 1);
    case ':': return take(Tok::Colon, 1);
    case '=': return take(Tok::Equal, 1);
    default: break;
  }
  if (c == '%' || c == '@') {
    size_t n = name_length(pos_ + 1);
    if (n == 0)
      error_at(file_, loc_, fmt::format("expected a name after '{}'", c));
    return take(c == '%' ? Tok::Value : Tok::Symbol, n + 1);
  }
  if (is_alpha(c)) return take(Tok::Ident, name_length(pos_));
  if (c == '-' && at(pos_ + 1) == '>') return take(Tok::Arrow, 2);
  bool sign = c == '-' && (is_digit(at(pos_ + 1)) || at(pos_ + 1) == '.');
  if (is_digit(c) || sign || (c == '.' && is_digit(at(pos_ + 1)))) {
    // Take the whole run of number-like bytes, so "1x" is one bad number rather than two tokens.
    size_t n = 1;
    while (is_name_char(at(pos_ + n)) ||
           ((at(pos_ + n) == '+' || at(pos_ + n) == '-') &&
            (at(pos_ + n - 1) == 'e' || at(pos_ + n - 1) == 'E')))
      ++n;
    return take(Tok::Number, n);
  }
  error_at(file_, loc_, fmt::format("unexpected character '{}'", show_char(c)));
}

}  // namespace mlpc::ir
