//! Tokens of TorchScript source (`code/*.py`): Python's lexical rules as
//! far as `torch.jit.save` prints them. Indentation becomes `Indent` /
//! `Dedent` tokens; newlines inside brackets join lines, as in Python.

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    /// An operator or punctuation (`(`, `->`, `**`, `==`, `:`).
    Op(&'static str),
    Newline,
    Indent,
    Dedent,
    End,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    /// 1-based line in its file.
    pub line: u32,
}

/// Operators, longest first so that `**` wins over `*`.
const OPS: &[&str] = &[
    "**=", "//=", ">>=", "<<=", "->", "**", "//", "==", "!=", "<=", ">=", "<<", ">>", "+=", "-=",
    "*=", "/=", "%=", "&=", "|=", "^=", "(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "+", "-",
    "*", "/", "%", "@", "&", "|", "^", "~", "<", ">", "=",
];

/// Splits one file into tokens; `file` names it in errors.
pub fn tokenize(file: &str, src: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut indents = vec![0usize];
    let mut depth = 0usize;
    let bytes = src.as_bytes();
    let mut i = 0usize;
    let mut line = 1u32;
    let mut at_line_start = true;
    let fail = |line: u32, msg: String| Error::bad_input(format!("{file}:{line}: {msg}"));
    while i < bytes.len() {
        if at_line_start && depth == 0 {
            // Measure indentation; blank and comment-only lines do not count.
            let mut col = 0;
            let mut j = i;
            while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
                col += if bytes[j] == b'\t' { 8 - col % 8 } else { 1 };
                j += 1;
            }
            if j >= bytes.len() || bytes[j] == b'\n' || bytes[j] == b'#' || bytes[j] == b'\r' {
                while j < bytes.len() && bytes[j] != b'\n' {
                    j += 1;
                }
                i = j + 1;
                line += 1;
                continue;
            }
            let current = *indents.last().unwrap_or(&0);
            if col > current {
                indents.push(col);
                out.push(Token {
                    tok: Tok::Indent,
                    line,
                });
            } else {
                while col < *indents.last().unwrap_or(&0) {
                    indents.pop();
                    out.push(Token {
                        tok: Tok::Dedent,
                        line,
                    });
                }
                if col != *indents.last().unwrap_or(&0) {
                    return Err(fail(line, "indentation matches no outer block".into()));
                }
            }
            i = j;
            at_line_start = false;
            continue;
        }
        let c = bytes[i];
        match c {
            b'\n' => {
                if depth == 0 {
                    out.push(Token {
                        tok: Tok::Newline,
                        line,
                    });
                    at_line_start = true;
                }
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => {
                i += 2;
                line += 1;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                let (s, next, lines) = string(bytes, i).map_err(|m| fail(line, m))?;
                out.push(Token {
                    tok: Tok::Str(s),
                    line,
                });
                line += lines;
                i = next;
            }
            b'0'..=b'9' => {
                let start = i;
                let hex = c == b'0' && matches!(bytes.get(i + 1), Some(b'x') | Some(b'X'));
                let mut float = false;
                if hex {
                    i += 2;
                    while i < bytes.len() && (bytes[i].is_ascii_hexdigit() || bytes[i] == b'_') {
                        i += 1;
                    }
                } else {
                    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                        i += 1;
                    }
                    if i < bytes.len() && bytes[i] == b'.' {
                        float = true;
                        i += 1;
                        while i < bytes.len() && bytes[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                        float = true;
                        i += 1;
                        if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                            i += 1;
                        }
                        while i < bytes.len() && bytes[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let text = std::str::from_utf8(&bytes[start..i]).unwrap_or("");
                let text = text.replace('_', "");
                let tok = if float {
                    Tok::Float(
                        text.parse()
                            .map_err(|_| fail(line, format!("bad number {text}")))?,
                    )
                } else if let Some(hex) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
                    Tok::Int(
                        i64::from_str_radix(hex, 16)
                            .map_err(|_| fail(line, format!("bad number {text}")))?,
                    )
                } else {
                    match text.parse::<i64>() {
                        Ok(v) => Tok::Int(v),
                        Err(_) => {
                            return Err(fail(line, format!("integer {text} does not fit 64 bits")))
                        }
                    }
                };
                out.push(Token { tok, line });
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] >= 0x80)
                {
                    i += 1;
                }
                let name = String::from_utf8_lossy(&bytes[start..i]).into_owned();
                // String prefixes: r"..", b"..", f"..".
                if matches!(name.as_str(), "r" | "b" | "u")
                    && matches!(bytes.get(i), Some(b'"') | Some(b'\''))
                {
                    let (s, next, lines) = string(bytes, i).map_err(|m| fail(line, m))?;
                    out.push(Token {
                        tok: Tok::Str(s),
                        line,
                    });
                    line += lines;
                    i = next;
                    continue;
                }
                out.push(Token {
                    tok: Tok::Name(name),
                    line,
                });
            }
            _ => {
                let rest = &src[i..];
                let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) else {
                    return Err(fail(
                        line,
                        format!(
                            "unexpected character {:?}",
                            rest.chars().next().unwrap_or(' ')
                        ),
                    ));
                };
                match *op {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                out.push(Token {
                    tok: Tok::Op(op),
                    line,
                });
                i += op.len();
            }
        }
    }
    if !matches!(out.last().map(|t| &t.tok), Some(Tok::Newline) | None) {
        out.push(Token {
            tok: Tok::Newline,
            line,
        });
    }
    while indents.len() > 1 {
        indents.pop();
        out.push(Token {
            tok: Tok::Dedent,
            line,
        });
    }
    out.push(Token {
        tok: Tok::End,
        line,
    });
    Ok(out)
}

/// A quoted string from `start` (its quote): the text, where it ends and
/// how many newlines it spans.
fn string(bytes: &[u8], start: usize) -> std::result::Result<(String, usize, u32), String> {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    let mut out = Vec::new();
    let mut lines = 0;
    loop {
        let Some(&c) = bytes.get(i) else {
            return Err("unterminated string".into());
        };
        if c == quote {
            if !triple {
                i += 1;
                break;
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                i += 3;
                break;
            }
        }
        if c == b'\n' {
            if !triple {
                return Err("unterminated string".into());
            }
            lines += 1;
        }
        if c == b'\\' {
            let Some(&e) = bytes.get(i + 1) else {
                return Err("unterminated string".into());
            };
            i += 2;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'0' => out.push(0),
                b'\\' | b'\'' | b'"' => out.push(e),
                b'\n' => lines += 1,
                b'x' => {
                    let hex = std::str::from_utf8(bytes.get(i..i + 2).unwrap_or(b"")).unwrap_or("");
                    let v =
                        u8::from_str_radix(hex, 16).map_err(|_| "bad \\x escape".to_string())?;
                    out.push(v);
                    i += 2;
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    Ok((String::from_utf8_lossy(&out).into_owned(), i, lines))
}
