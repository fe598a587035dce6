//! `write_file` and `move_file`.

use serde::Deserialize;
use serde_json::{json, Value};

use super::confine::confine_write;
use super::read::io_text;
use super::{blocking, parse_args, Tool, ToolContext, ToolOutput};

/// `write_file{path, content}`: creates parents, replaces the whole file.
pub struct WriteFileTool;

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[async_trait::async_trait]
impl Tool for WriteFileTool {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn description(&self) -> &'static str {
        "Create or overwrite a file with the given content; missing parent directories are \
         created. Prefer edit_file for changing part of an existing file. Only paths inside the \
         workspace (or the configured allow_write roots) can be written."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace or absolute"},
                "content": {"type": "string", "description": "The complete new content of the file"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: WriteArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || {
            let target = match confine_write(&ctx, &a.path) {
                Ok(t) => t,
                Err(e) => return ToolOutput::err(e.to_string()),
            };
            let shown = ctx.display(target.path());
            match std::fs::metadata(target.path()) {
                Ok(m) if m.is_dir() => {
                    return ToolOutput::err(format!("{shown} is a directory, not a file"))
                }
                Ok(_) => {
                    if std::fs::read(target.path()).is_ok_and(|old| old == a.content.as_bytes()) {
                        return ToolOutput::ok(format!(
                            "no changes made: {shown} already has this content"
                        ));
                    }
                }
                Err(_) => {}
            }
            match target.write(&ctx, a.content.as_bytes()) {
                Ok(()) => ToolOutput::ok(format!("wrote {} bytes to {shown}", a.content.len())),
                Err(e) => ToolOutput::err(format!("write {shown}: {}", io_text(&e))),
            }
        })
        .await
    }
}

/// `move_file{source_path, destination_path}`: files only, destination must not exist.
pub struct MoveFileTool;

#[derive(Deserialize)]
struct MoveArgs {
    source_path: String,
    destination_path: String,
}

#[async_trait::async_trait]
impl Tool for MoveFileTool {
    fn name(&self) -> &'static str {
        "move_file"
    }

    fn description(&self) -> &'static str {
        "Move or rename a single file. The destination must not exist; missing parent \
         directories are created. Directories cannot be moved with this tool."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "source_path": {"type": "string", "description": "Existing file to move"},
                "destination_path": {"type": "string", "description": "New path; must not exist yet"}
            },
            "required": ["source_path", "destination_path"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: MoveArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || move_file(&ctx, &a)).await
    }
}

fn move_file(ctx: &ToolContext, a: &MoveArgs) -> ToolOutput {
    // The source itself is moved, not what a symlink points to: confine its parent and keep
    // the final name.
    let src_abs = ctx.resolve(&a.source_path);
    let src_meta = match std::fs::symlink_metadata(&src_abs) {
        Ok(m) => m,
        Err(e) => {
            return ToolOutput::err(format!("move {}: {}", a.source_path, io_text(&e)));
        }
    };
    if src_meta.is_dir() {
        return ToolOutput::err(format!(
            "{} is a directory; move_file moves files only (use bash `mv` for directories)",
            a.source_path
        ));
    }
    let source = match confine_source(ctx, &a.source_path) {
        Ok(t) => t,
        Err(e) => return ToolOutput::err(e.to_string()),
    };
    let dest = match confine_write(ctx, &a.destination_path) {
        Ok(t) => t,
        Err(e) => return ToolOutput::err(e.to_string()),
    };
    let dest_shown = ctx.display(dest.path());
    if std::fs::symlink_metadata(dest.path()).is_ok() {
        return ToolOutput::err(format!(
            "destination {dest_shown} already exists; move_file never overwrites (delete it first or pick another name)"
        ));
    }
    let src_shown = ctx.display(source.path());
    match source.move_to(ctx, &dest) {
        Ok(()) => ToolOutput::ok(format!("moved {src_shown} to {dest_shown}")),
        Err(e) => ToolOutput::err(format!("move {src_shown} to {dest_shown}: {}", io_text(&e))),
    }
}

/// Confines the directory holding `raw`, keeping its last component unresolved (a symlink
/// is moved as a link).
fn confine_source(
    ctx: &ToolContext,
    raw: &str,
) -> Result<super::confine::WriteTarget, super::ConfineError> {
    let abs = ctx.resolve(raw);
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => {
            let parent_target = confine_write(ctx, &parent.to_string_lossy())?;
            super::confine::unresolved_target(ctx, parent_target.path().join(name), raw)
        }
        _ => confine_write(ctx, raw),
    }
}
