//! A recursive-descent parser for the Python subset TorchScript prints
//! (`code/*.py`): classes with annotated attributes and `def`s with typed
//! parameters, `if`/`for`/`while`, assignments (tuples included), calls
//! with keyword arguments, attribute access, subscripts and slices,
//! tuple/list/dict displays, conditional expressions. Types are parsed as
//! expressions (`Optional[int]`, `Tuple[Tensor, Tensor]`). Every node keeps
//! its line, so a refusal can point into the archive's source.

use super::lexer::{Tok, Token};
use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    None,
    Bool(bool),
    Attr(Box<Expr>, String),
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        kwargs: Vec<(String, Expr)>,
    },
    Index(Box<Expr>, Box<Expr>),
    Slice(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    Dict(Vec<(Expr, Expr)>),
    /// `-`, `+`, `~`, `not`.
    Unary(&'static str, Box<Expr>),
    /// Arithmetic, comparisons (`is not`, `not in` as one operator), `and`, `or`.
    Binary(&'static str, Box<Expr>, Box<Expr>),
    IfExp {
        cond: Box<Expr>,
        then: Box<Expr>,
        orelse: Box<Expr>,
    },
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ann: Option<Expr>,
    pub default: Option<Expr>,
}

#[derive(Clone, Debug)]
pub struct FuncDef {
    pub name: String,
    pub params: Vec<Param>,
    pub body: Vec<Stmt>,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub struct ClassDef {
    pub name: String,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub line: u32,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    Assign {
        targets: Vec<Expr>,
        value: Expr,
    },
    AugAssign {
        target: Expr,
        op: &'static str,
        value: Expr,
    },
    /// `name : Type = value` (the type is checked by nothing here).
    AnnAssign {
        target: Expr,
        value: Option<Expr>,
    },
    Expr(Expr),
    If {
        cond: Expr,
        body: Vec<Stmt>,
        orelse: Vec<Stmt>,
    },
    For {
        target: Expr,
        iter: Expr,
        body: Vec<Stmt>,
    },
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    Return(Option<Expr>),
    Pass,
    Break,
    Continue,
    Raise(Option<Expr>),
    Assert(Expr),
    Def(FuncDef),
    Class(ClassDef),
    Import,
}

/// Parses one file's tokens into statements; `file` names it in errors.
pub fn parse(file: &str, tokens: Vec<Token>) -> Result<Vec<Stmt>> {
    let mut p = Parser {
        file,
        tokens,
        pos: 0,
        depth: 0,
    };
    let mut out = Vec::new();
    loop {
        match p.peek() {
            Tok::End => break,
            Tok::Newline => {
                p.pos += 1;
            }
            _ => out.push(p.statement()?),
        }
    }
    Ok(out)
}

/// Deepest nesting of expressions and blocks taken (a hostile file cannot
/// overflow the stack).
const MAX_DEPTH: usize = 200;

struct Parser<'f> {
    file: &'f str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos.min(self.tokens.len() - 1)].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.tokens[(self.pos + k).min(self.tokens.len() - 1)].tok
    }

    fn line(&self) -> u32 {
        self.tokens[self.pos.min(self.tokens.len() - 1)].line
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn fail(&self, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}:{}: {msg}", self.file, self.line()))
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(o) if *o == op)
    }

    fn is_name(&self, name: &str) -> bool {
        matches!(self.peek(), Tok::Name(n) if n == name)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if self.is_op(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_name(&mut self, name: &str) -> bool {
        if self.is_name(name) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> Result<()> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.fail(format!("expected '{op}', found {}", show(self.peek()))))
        }
    }

    fn name(&mut self) -> Result<String> {
        match self.next() {
            Tok::Name(n) => Ok(n),
            other => {
                self.pos -= 1;
                Err(self.fail(format!("expected a name, found {}", show(&other))))
            }
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.fail(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn end_of_statement(&mut self) -> Result<()> {
        if matches!(self.peek(), Tok::Newline) {
            self.pos += 1;
            return Ok(());
        }
        if self.eat_op(";") || matches!(self.peek(), Tok::End | Tok::Dedent) {
            return Ok(());
        }
        Err(self.fail(format!(
            "expected the end of the line, found {}",
            show(self.peek())
        )))
    }

    fn block(&mut self) -> Result<Vec<Stmt>> {
        self.expect_op(":")?;
        if !matches!(self.peek(), Tok::Newline) {
            // `if c: return x` on one line.
            let s = self.simple_statement()?;
            return Ok(vec![s]);
        }
        self.pos += 1;
        if !matches!(self.next(), Tok::Indent) {
            self.pos -= 1;
            return Err(self.fail("expected an indented block"));
        }
        self.enter()?;
        let mut body = Vec::new();
        loop {
            match self.peek() {
                Tok::Dedent => {
                    self.pos += 1;
                    break;
                }
                Tok::End => break,
                Tok::Newline => self.pos += 1,
                _ => body.push(self.statement()?),
            }
        }
        self.depth -= 1;
        Ok(body)
    }

    fn statement(&mut self) -> Result<Stmt> {
        let line = self.line();
        let kind = match self.peek().clone() {
            Tok::Name(n) if n == "def" => StmtKind::Def(self.def()?),
            Tok::Name(n) if n == "class" => {
                self.pos += 1;
                let name = self.name()?;
                if self.eat_op("(") {
                    while !self.eat_op(")") {
                        self.expr()?;
                        if !self.eat_op(",") {
                            self.expect_op(")")?;
                            break;
                        }
                    }
                }
                let body = self.block()?;
                StmtKind::Class(ClassDef { name, body })
            }
            Tok::Name(n) if n == "if" => {
                self.pos += 1;
                self.if_rest()?
            }
            Tok::Name(n) if n == "for" => {
                self.pos += 1;
                let target = self.target_list()?;
                if !self.eat_name("in") {
                    return Err(self.fail("expected 'in'"));
                }
                let iter = self.expr_list()?;
                let body = self.block()?;
                StmtKind::For { target, iter, body }
            }
            Tok::Name(n) if n == "while" => {
                self.pos += 1;
                let cond = self.expr()?;
                let body = self.block()?;
                StmtKind::While { cond, body }
            }
            _ => return self.simple_statement(),
        };
        Ok(Stmt { kind, line })
    }

    fn if_rest(&mut self) -> Result<StmtKind> {
        let cond = self.expr()?;
        let body = self.block()?;
        let orelse = if self.is_name("elif") {
            let line = self.line();
            self.pos += 1;
            vec![Stmt {
                kind: self.if_rest()?,
                line,
            }]
        } else if self.eat_name("else") {
            self.block()?
        } else {
            Vec::new()
        };
        Ok(StmtKind::If { cond, body, orelse })
    }

    fn def(&mut self) -> Result<FuncDef> {
        let line = self.line();
        self.pos += 1;
        let name = self.name()?;
        self.expect_op("(")?;
        let mut params = Vec::new();
        while !self.eat_op(")") {
            if self.eat_op("*") || self.eat_op("**") {
                // `*args` / a bare `*`: keyword-only marker; names follow.
                if matches!(self.peek(), Tok::Name(_)) {
                    return Err(self.fail("variadic parameters are not TorchScript"));
                }
                if !self.eat_op(",") {
                    self.expect_op(")")?;
                    break;
                }
                continue;
            }
            let pname = self.name()?;
            let ann = if self.eat_op(":") {
                Some(self.expr()?)
            } else {
                None
            };
            let default = if self.eat_op("=") {
                Some(self.expr()?)
            } else {
                None
            };
            params.push(Param {
                name: pname,
                ann,
                default,
            });
            if !self.eat_op(",") {
                self.expect_op(")")?;
                break;
            }
        }
        if self.eat_op("->") {
            self.expr()?;
        }
        let body = self.block()?;
        Ok(FuncDef {
            name,
            params,
            body,
            line,
        })
    }

    fn simple_statement(&mut self) -> Result<Stmt> {
        let line = self.line();
        let kind = match self.peek().clone() {
            Tok::Name(n) if n == "return" => {
                self.pos += 1;
                if matches!(self.peek(), Tok::Newline | Tok::End | Tok::Dedent) || self.is_op(";") {
                    StmtKind::Return(None)
                } else {
                    StmtKind::Return(Some(self.expr_list()?))
                }
            }
            Tok::Name(n) if n == "pass" => {
                self.pos += 1;
                StmtKind::Pass
            }
            Tok::Name(n) if n == "break" => {
                self.pos += 1;
                StmtKind::Break
            }
            Tok::Name(n) if n == "continue" => {
                self.pos += 1;
                StmtKind::Continue
            }
            Tok::Name(n) if n == "raise" => {
                self.pos += 1;
                if matches!(self.peek(), Tok::Newline | Tok::End | Tok::Dedent) {
                    StmtKind::Raise(None)
                } else {
                    let e = self.expr()?;
                    if self.eat_name("from") {
                        self.expr()?;
                    }
                    StmtKind::Raise(Some(e))
                }
            }
            Tok::Name(n) if n == "assert" => {
                self.pos += 1;
                let cond = self.expr()?;
                if self.eat_op(",") {
                    self.expr()?;
                }
                StmtKind::Assert(cond)
            }
            Tok::Name(n) if n == "import" || n == "from" => {
                while !matches!(self.peek(), Tok::Newline | Tok::End) {
                    self.next();
                }
                StmtKind::Import
            }
            Tok::Name(n) if n == "global" || n == "nonlocal" || n == "del" => {
                return Err(self.fail(format!("'{n}' is not read")));
            }
            _ => {
                let first = self.expr_list()?;
                if self.eat_op(":") {
                    self.expr()?;
                    let value = if self.eat_op("=") {
                        Some(self.expr_list()?)
                    } else {
                        None
                    };
                    StmtKind::AnnAssign {
                        target: first,
                        value,
                    }
                } else if self.is_op("=") {
                    let mut targets = vec![first];
                    let mut value;
                    loop {
                        self.expect_op("=")?;
                        value = self.expr_list()?;
                        if !self.is_op("=") {
                            break;
                        }
                        targets.push(value.clone());
                    }
                    StmtKind::Assign { targets, value }
                } else if let Some(op) =
                    ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "&=", "|=", "^="]
                        .into_iter()
                        .find(|op| self.is_op(op))
                {
                    self.pos += 1;
                    let value = self.expr_list()?;
                    StmtKind::AugAssign {
                        target: first,
                        op: binary_of_aug(op),
                        value,
                    }
                } else {
                    StmtKind::Expr(first)
                }
            }
        };
        self.end_of_statement()?;
        Ok(Stmt { kind, line })
    }

    /// `a, b` (a tuple without brackets) or one expression.
    fn expr_list(&mut self) -> Result<Expr> {
        let line = self.line();
        let first = self.expr()?;
        if !self.is_op(",") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.at_list_end() {
                break;
            }
            items.push(self.expr()?);
        }
        Ok(Expr {
            kind: ExprKind::Tuple(items),
            line,
        })
    }

    /// The targets of a `for`: names and tuples of them, up to `in`.
    fn target_list(&mut self) -> Result<Expr> {
        let line = self.line();
        let mut items = vec![self.postfix()?];
        while self.eat_op(",") {
            if self.is_name("in") {
                break;
            }
            items.push(self.postfix()?);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(Expr {
                kind: ExprKind::None,
                line,
            })
        } else {
            Expr {
                kind: ExprKind::Tuple(items),
                line,
            }
        })
    }

    fn at_list_end(&self) -> bool {
        matches!(self.peek(), Tok::Newline | Tok::End | Tok::Dedent)
            || self.is_op("=")
            || self.is_op(")")
            || self.is_op("]")
            || self.is_op("}")
            || self.is_op(":")
    }

    fn expr(&mut self) -> Result<Expr> {
        self.enter()?;
        let line = self.line();
        let e = self.or_expr()?;
        let out = if self.is_name("if") {
            self.pos += 1;
            let cond = self.or_expr()?;
            if !self.eat_name("else") {
                return Err(self.fail("expected 'else' in a conditional expression"));
            }
            let orelse = self.expr()?;
            Expr {
                kind: ExprKind::IfExp {
                    cond: Box::new(cond),
                    then: Box::new(e),
                    orelse: Box::new(orelse),
                },
                line,
            }
        } else {
            e
        };
        self.depth -= 1;
        Ok(out)
    }

    fn or_expr(&mut self) -> Result<Expr> {
        let mut left = self.and_expr()?;
        while self.is_name("or") {
            let line = self.line();
            self.pos += 1;
            let right = self.and_expr()?;
            left = binary("or", left, right, line);
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr> {
        let mut left = self.not_expr()?;
        while self.is_name("and") {
            let line = self.line();
            self.pos += 1;
            let right = self.not_expr()?;
            left = binary("and", left, right, line);
        }
        Ok(left)
    }

    fn not_expr(&mut self) -> Result<Expr> {
        if self.is_name("not") {
            let line = self.line();
            self.pos += 1;
            self.enter()?;
            let e = self.not_expr()?;
            self.depth -= 1;
            return Ok(Expr {
                kind: ExprKind::Unary("not", Box::new(e)),
                line,
            });
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr> {
        let mut left = self.arith(0)?;
        loop {
            let line = self.line();
            let op = match self.peek() {
                Tok::Op(o) if matches!(*o, "==" | "!=" | "<" | "<=" | ">" | ">=") => {
                    let o = *o;
                    self.pos += 1;
                    o
                }
                Tok::Name(n) if n == "in" => {
                    self.pos += 1;
                    "in"
                }
                Tok::Name(n) if n == "is" => {
                    self.pos += 1;
                    if self.eat_name("not") {
                        "is not"
                    } else {
                        "is"
                    }
                }
                Tok::Name(n)
                    if n == "not" && matches!(self.peek_at(1), Tok::Name(m) if m == "in") =>
                {
                    self.pos += 2;
                    "not in"
                }
                _ => break,
            };
            let right = self.arith(0)?;
            left = binary(op, left, right, line);
        }
        Ok(left)
    }

    /// Binary operators by precedence level, loosest first.
    fn arith(&mut self, level: usize) -> Result<Expr> {
        const LEVELS: &[&[&str]] = &[
            &["|"],
            &["^"],
            &["&"],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "//", "%", "@"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.arith(level + 1)?;
        loop {
            let line = self.line();
            let Some(op) = LEVELS[level].iter().find(|op| self.is_op(op)) else {
                break;
            };
            self.pos += 1;
            let right = self.arith(level + 1)?;
            left = binary(op, left, right, line);
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr> {
        let line = self.line();
        for op in ["-", "+", "~"] {
            if self.is_op(op) {
                self.pos += 1;
                self.enter()?;
                let e = self.unary()?;
                self.depth -= 1;
                // Fold a negative literal, as Python's printer means it.
                let kind = match (op, e.kind) {
                    ("-", ExprKind::Int(i)) => ExprKind::Int(i.wrapping_neg()),
                    ("-", ExprKind::Float(f)) => ExprKind::Float(-f),
                    (_, kind) => {
                        ExprKind::Unary(op_static(op), Box::new(Expr { kind, line: e.line }))
                    }
                };
                return Ok(Expr { kind, line });
            }
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr> {
        let line = self.line();
        let base = self.postfix()?;
        if self.eat_op("**") {
            let exp = self.unary()?;
            return Ok(binary("**", base, exp, line));
        }
        Ok(base)
    }

    fn postfix(&mut self) -> Result<Expr> {
        let mut e = self.atom()?;
        loop {
            let line = self.line();
            if self.eat_op(".") {
                let name = self.name()?;
                e = Expr {
                    kind: ExprKind::Attr(Box::new(e), name),
                    line,
                };
            } else if self.eat_op("(") {
                let mut args = Vec::new();
                let mut kwargs = Vec::new();
                while !self.eat_op(")") {
                    if let (Tok::Name(n), Tok::Op("=")) = (self.peek().clone(), self.peek_at(1)) {
                        self.pos += 2;
                        kwargs.push((n, self.expr()?));
                    } else {
                        if !kwargs.is_empty() {
                            return Err(self.fail("a positional argument follows a keyword one"));
                        }
                        args.push(self.expr()?);
                    }
                    if !self.eat_op(",") {
                        self.expect_op(")")?;
                        break;
                    }
                }
                e = Expr {
                    kind: ExprKind::Call {
                        func: Box::new(e),
                        args,
                        kwargs,
                    },
                    line,
                };
            } else if self.eat_op("[") {
                let index = self.subscript()?;
                self.expect_op("]")?;
                e = Expr {
                    kind: ExprKind::Index(Box::new(e), Box::new(index)),
                    line,
                };
            } else {
                break;
            }
        }
        Ok(e)
    }

    /// What sits between `[` and `]`: indices, slices, tuples of them.
    fn subscript(&mut self) -> Result<Expr> {
        let line = self.line();
        let mut items = Vec::new();
        loop {
            items.push(self.slice_item()?);
            if !self.eat_op(",") || self.is_op("]") {
                break;
            }
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr {
                kind: ExprKind::Tuple(items),
                line,
            }
        })
    }

    fn slice_item(&mut self) -> Result<Expr> {
        let line = self.line();
        let start = if self.is_op(":") {
            None
        } else {
            let e = self.expr()?;
            if !self.is_op(":") {
                return Ok(e);
            }
            Some(Box::new(e))
        };
        self.expect_op(":")?;
        let bound = |p: &mut Self| -> Result<Option<Box<Expr>>> {
            if p.is_op(":") || p.is_op("]") || p.is_op(",") {
                Ok(None)
            } else {
                Ok(Some(Box::new(p.expr()?)))
            }
        };
        let stop = bound(self)?;
        let step = if self.eat_op(":") { bound(self)? } else { None };
        Ok(Expr {
            kind: ExprKind::Slice(start, stop, step),
            line,
        })
    }

    fn atom(&mut self) -> Result<Expr> {
        let line = self.line();
        let kind = match self.next() {
            Tok::Name(n) => match n.as_str() {
                "None" => ExprKind::None,
                "True" => ExprKind::Bool(true),
                "False" => ExprKind::Bool(false),
                "lambda" => {
                    self.pos -= 1;
                    return Err(self.fail("lambda is not TorchScript"));
                }
                _ => ExprKind::Name(n),
            },
            Tok::Int(i) => ExprKind::Int(i),
            Tok::Float(f) => ExprKind::Float(f),
            Tok::Str(s) => {
                let mut s = s;
                // Adjacent literals concatenate.
                while let Tok::Str(t) = self.peek().clone() {
                    self.pos += 1;
                    s.push_str(&t);
                }
                ExprKind::Str(s)
            }
            Tok::Op("(") => {
                self.enter()?;
                let kind = if self.eat_op(")") {
                    ExprKind::Tuple(Vec::new())
                } else {
                    let first = self.expr()?;
                    if self.eat_op(")") {
                        self.depth -= 1;
                        return Ok(first);
                    }
                    let mut items = vec![first];
                    while self.eat_op(",") {
                        if self.is_op(")") {
                            break;
                        }
                        items.push(self.expr()?);
                    }
                    self.expect_op(")")?;
                    ExprKind::Tuple(items)
                };
                self.depth -= 1;
                kind
            }
            Tok::Op("[") => {
                self.enter()?;
                let mut items = Vec::new();
                while !self.eat_op("]") {
                    items.push(self.expr()?);
                    if self.is_name("for") {
                        return Err(self.fail("list comprehensions are not read"));
                    }
                    if !self.eat_op(",") {
                        self.expect_op("]")?;
                        break;
                    }
                }
                self.depth -= 1;
                ExprKind::List(items)
            }
            Tok::Op("{") => {
                self.enter()?;
                let mut items = Vec::new();
                while !self.eat_op("}") {
                    let k = self.expr()?;
                    self.expect_op(":")?;
                    let v = self.expr()?;
                    items.push((k, v));
                    if !self.eat_op(",") {
                        self.expect_op("}")?;
                        break;
                    }
                }
                self.depth -= 1;
                ExprKind::Dict(items)
            }
            other => {
                self.pos -= 1;
                return Err(self.fail(format!("expected an expression, found {}", show(&other))));
            }
        };
        Ok(Expr { kind, line })
    }
}

fn binary(op: &'static str, left: Expr, right: Expr, line: u32) -> Expr {
    Expr {
        kind: ExprKind::Binary(op, Box::new(left), Box::new(right)),
        line,
    }
}

fn binary_of_aug(op: &str) -> &'static str {
    match op {
        "+=" => "+",
        "-=" => "-",
        "*=" => "*",
        "/=" => "/",
        "//=" => "//",
        "%=" => "%",
        "**=" => "**",
        "&=" => "&",
        "|=" => "|",
        _ => "^",
    }
}

fn op_static(op: &str) -> &'static str {
    match op {
        "-" => "-",
        "+" => "+",
        _ => "~",
    }
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Name(n) => n.clone(),
        Tok::Int(i) => i.to_string(),
        Tok::Float(f) => f.to_string(),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Op(o) => o.to_string(),
        Tok::Newline => "the end of the line".into(),
        Tok::Indent => "an indent".into(),
        Tok::Dedent => "a dedent".into(),
        Tok::End => "the end of the file".into(),
    }
}

impl Expr {
    /// A dotted name (`torch.nn.functional.relu`, `ops.prim.NumToTensor`), if
    /// this is one.
    pub fn dotted(&self) -> Option<String> {
        match &self.kind {
            ExprKind::Name(n) => Some(n.clone()),
            ExprKind::Attr(base, name) => Some(format!("{}.{name}", base.dotted()?)),
            _ => None,
        }
    }
}
