//! The module tree of a TorchScript archive: `data.pkl` (the root module
//! object, its submodules, parameters, buffers and attributes),
//! `constants.pkl` (the tensors `CONSTANTS.cN` names), and the classes of
//! `code/` (methods, which attributes are parameters and buffers, `Final`
//! class constants), each file parsed once when a class of it is used.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::parser::{ClassDef, ExprKind, FuncDef, Stmt, StmtKind};
use super::{lexer, parser};
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::import::pickle::{unpickle_torchscript, Py};
use crate::zip::Archive;

/// One class of `code/`.
pub struct Class {
    pub name: String,
    /// The `code/` file it is in (for messages).
    pub file: String,
    pub methods: HashMap<String, Rc<FuncDef>>,
    pub parameters: Vec<String>,
    pub buffers: Vec<String>,
    /// `name : Final[int] = 4` and other class-level constants.
    pub constants: Vec<(String, parser::Expr)>,
}

pub struct Tree<'a> {
    pub archive: &'a Archive,
    /// Member prefix of the archive's records (`model/`).
    pub root: String,
    pub module: Py,
    pub constants: Vec<Py>,
    files: RefCell<HashMap<String, Rc<Vec<Stmt>>>>,
    classes: RefCell<HashMap<String, Rc<Class>>>,
}

impl<'a> Tree<'a> {
    pub fn read(archive: &'a Archive) -> Result<Tree<'a>> {
        let data = archive
            .entries()
            .iter()
            .map(|e| e.name.clone())
            .filter(|n| n.ends_with("data.pkl"))
            .find(|n| {
                let root = n.strip_suffix("data.pkl").unwrap_or("");
                archive
                    .entries()
                    .iter()
                    .any(|e| e.name.starts_with(&format!("{root}code/")))
            })
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "{}: no data.pkl beside a code/ directory: not a TorchScript archive (torch.jit.save)",
                    archive.path
                ))
            })?;
        let root = data.strip_suffix("data.pkl").unwrap_or("").to_string();
        let bytes = archive.member(&data)?;
        let module = unpickle_torchscript(&bytes)
            .map_err(|e| e.at(format!("{}: member '{data}'", archive.path)))?;
        let constants_name = format!("{root}constants.pkl");
        let constants = if archive.contains(&constants_name) {
            let bytes = archive.member(&constants_name)?;
            match unpickle_torchscript(&bytes)
                .map_err(|e| e.at(format!("{}: member '{constants_name}'", archive.path)))?
            {
                Py::Tuple(items) | Py::List(items) => items,
                other => {
                    return Err(Error::bad_input(format!(
                        "{}: {constants_name} holds {}, expected a tuple",
                        archive.path,
                        other.describe()
                    )))
                }
            }
        } else {
            Vec::new()
        };
        Ok(Tree {
            archive,
            root,
            module,
            constants,
            files: Default::default(),
            classes: Default::default(),
        })
    }

    /// A storage member: `data/KEY` for `data.pkl`, `constants/KEY` for
    /// `constants.pkl`.
    pub fn storage(&self, dir: &str, key: &str) -> Result<(String, Blob)> {
        let name = format!("{}{dir}/{key}", self.root);
        Ok((name.clone(), self.archive.member(&name)?))
    }

    /// The class `qualified` (`__torch__.torch.nn.modules.conv.Conv2d`).
    pub fn class(&self, qualified: &str) -> Result<Rc<Class>> {
        if let Some(c) = self.classes.borrow().get(qualified) {
            return Ok(c.clone());
        }
        let (module, name) = qualified
            .rsplit_once('.')
            .ok_or_else(|| Error::bad_input(format!("class name {qualified} has no module")))?;
        let file = format!("code/{}.py", module.replace('.', "/"));
        let stmts = self.file(&file)?;
        let def = stmts
            .iter()
            .find_map(|s| match &s.kind {
                StmtKind::Class(c) if c.name == name => Some(c),
                _ => None,
            })
            .ok_or_else(|| {
                Error::bad_input(format!("{file}: class {name} is not defined there"))
            })?;
        let class = Rc::new(class_of(def, qualified, &file));
        self.classes
            .borrow_mut()
            .insert(qualified.to_string(), class.clone());
        Ok(class)
    }

    /// A top-level function of `code/` (`__torch__.torch.nn.functional.relu`).
    pub fn function(&self, qualified: &str) -> Result<Option<(String, Rc<FuncDef>)>> {
        let Some((module, name)) = qualified.rsplit_once('.') else {
            return Ok(None);
        };
        let file = format!("code/{}.py", module.replace('.', "/"));
        if !self.archive.contains(&format!("{}{file}", self.root)) {
            return Ok(None);
        }
        let stmts = self.file(&file)?;
        Ok(stmts.iter().find_map(|s| match &s.kind {
            StmtKind::Def(f) if f.name == name => Some((file.clone(), Rc::new(f.clone()))),
            _ => None,
        }))
    }

    fn file(&self, file: &str) -> Result<Rc<Vec<Stmt>>> {
        if let Some(f) = self.files.borrow().get(file) {
            return Ok(f.clone());
        }
        let member = format!("{}{file}", self.root);
        if !self.archive.contains(&member) {
            return Err(Error::bad_input(format!(
                "{}: the archive has no {file}",
                self.archive.path
            )));
        }
        let bytes = self.archive.member(&member)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Error::bad_input(format!("{file}: not UTF-8 text")))?;
        let tokens = lexer::tokenize(file, text)?;
        let stmts = Rc::new(parser::parse(file, tokens)?);
        self.files
            .borrow_mut()
            .insert(file.to_string(), stmts.clone());
        Ok(stmts)
    }
}

fn strings(e: &parser::Expr) -> Vec<String> {
    match &e.kind {
        ExprKind::List(items) | ExprKind::Tuple(items) => items
            .iter()
            .filter_map(|i| match &i.kind {
                ExprKind::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn class_of(def: &ClassDef, qualified: &str, file: &str) -> Class {
    let mut class = Class {
        name: qualified.to_string(),
        file: file.to_string(),
        methods: HashMap::new(),
        parameters: Vec::new(),
        buffers: Vec::new(),
        constants: Vec::new(),
    };
    for s in &def.body {
        match &s.kind {
            StmtKind::Def(f) => {
                class.methods.insert(f.name.clone(), Rc::new(f.clone()));
            }
            StmtKind::Assign { targets, value } => {
                let Some(name) = targets.first().and_then(|t| t.dotted()) else {
                    continue;
                };
                match name.as_str() {
                    "__parameters__" => class.parameters = strings(value),
                    "__buffers__" => class.buffers = strings(value),
                    _ => class.constants.push((name, value.clone())),
                }
            }
            StmtKind::AnnAssign {
                target,
                value: Some(value),
                ..
            } => {
                if let Some(name) = target.dotted() {
                    class.constants.push((name, value.clone()));
                }
            }
            _ => {}
        }
    }
    class
}
