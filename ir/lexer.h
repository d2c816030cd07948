// Tokens of the .mlp text form. The lexer is lazy (one token at a time) so a large input never
// costs more than its own bytes, and every error it throws carries "FILE:LINE:COL: error: ".
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace mlpc::ir {

enum class Tok {
  Ident,   // func, op names, dtypes, the batch symbol: [A-Za-z_][A-Za-z0-9_.]*
  Value,   // %name
  Symbol,  // @name
  Number,  // 768, -0.5, 1e-05 (validated by the parser, which knows what it expects)
  LParen, RParen, LBrace, RBrace, LBracket, RBracket, Comma, Colon, Equal, Arrow,
  End,
};

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  // the whole lexeme, sigil included
  SourceLoc loc;
};

// How an error message shows a token: 'text', or "end of file".
std::string describe(const Token& t);

// "FILE:LINE:COL: error: MESSAGE" as an mlpc::Error.
[[noreturn]] void error_at(std::string_view file, SourceLoc at, std::string_view message);

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view file) : src_(src), file_(file) {}
  Token next();

 private:
  char at(size_t i) const { return i < src_.size() ? src_[i] : '\0'; }
  void skip_space_and_comments();
  Token take(Tok kind, size_t len);  // the next `len` bytes, all on one line, as one token
  size_t name_length(size_t from) const;

  std::string_view src_;
  std::string_view file_;
  size_t pos_ = 0;
  SourceLoc loc_{1, 1};
};

}  // namespace mlpc::ir
