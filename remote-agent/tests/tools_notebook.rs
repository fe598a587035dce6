//! `notebook_edit` and `read_file` on notebooks, against Python's `nbformat` (installed by
//! `.ci/run`): notebooks are made by nbformat, edited by the tool, and each result must be
//! exactly the bytes Python writes for the same edit (same indentation, same key order) and
//! pass `nbformat.validate`.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use reasonix_remote::policy::{Decision, Mode, Policy};
use reasonix_remote::sandbox::Sandbox;
use reasonix_remote::tools::{MutationHook, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{json, Value};

/// Python side: `make NB_PATH CUSTOM_PATH` writes one notebook with nbformat (indent 1, keys
/// sorted) and the same one by hand with indent 2 and its own key order; `check ORIG EDITED
/// OP STYLE` applies OP to ORIG the way the tool should (order kept) and compares bytes, then
/// validates EDITED with nbformat.
const PY: &str = r##"
import json, sys, nbformat
from nbformat.v4 import new_notebook, new_code_cell, new_markdown_cell, new_output

def dump(d, style):
    if style == "nbformat":
        return json.dumps(d, indent=1, sort_keys=True, ensure_ascii=False, separators=(",", ": ")) + "\n"
    return json.dumps(d, indent=2, ensure_ascii=False)

def lines(s):
    return s.splitlines(keepends=True)

mode = sys.argv[1]
if mode == "make":
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    c1 = new_code_cell("import math\nprint(math.pi)", execution_count=1)
    c1.outputs = [
        new_output("stream", name="stdout", text="3.141592653589793\n"),
        new_output("execute_result", data={"text/plain": "42", "image/png": "iVBORw0KGgo="}, execution_count=1),
    ]
    c2 = new_markdown_cell("# Überschrift\nText mit Umlauten: äöü")
    c3 = new_code_cell("x = 1", execution_count=2)
    c3.outputs = [new_output("error", ename="ValueError", evalue="bad", traceback=["tb"])]
    nb.cells = [c1, c2, c3]
    nbformat.validate(nb)
    nbformat.write(nb, sys.argv[2])
    # The same notebook with another writer's habits: indent 2, source first, no newline at end.
    d = json.loads(nbformat.writes(nb))
    def reorder(x):
        if isinstance(x, dict):
            keys = sorted(x, key=lambda k: (k != "source", k != "cell_type", k))
            return {k: reorder(x[k]) for k in keys}
        if isinstance(x, list):
            return [reorder(v) for v in x]
        return x
    d = reorder(d)
    d = {"nbformat": d["nbformat"], "nbformat_minor": d["nbformat_minor"], "metadata": d["metadata"], "cells": d["cells"]}
    open(sys.argv[3], "w", encoding="utf-8").write(dump(d, "custom"))
elif mode == "check":
    orig = json.load(open(sys.argv[2], encoding="utf-8"))
    edited = open(sys.argv[3], encoding="utf-8").read()
    op = json.loads(sys.argv[4])
    style = sys.argv[5]
    cells = orig["cells"]
    if op["mode"] == "replace":
        c = cells[op["index"]]
        new_type = op.get("cell_type", c["cell_type"])
        was_string = isinstance(c["source"], str)
        out = {}
        for k, v in c.items():
            if new_type == "code" and k == "attachments":
                continue
            if new_type != "code" and k in ("outputs", "execution_count"):
                continue
            out[k] = v
        out["cell_type"] = new_type
        out["source"] = op["source"] if was_string else lines(op["source"])
        if new_type == "code":
            for k, v in (("execution_count", None), ("outputs", [])):
                if k not in c:
                    keys = list(out)
                    at = next((i for i, have in enumerate(keys) if have > k), len(keys))
                    items = list(out.items())
                    items.insert(at, (k, v))
                    out = dict(items)
                else:
                    out[k] = v
        cells[op["index"]] = out
    elif op["mode"] == "insert":
        new = {"cell_type": op["cell_type"]}
        if op["cell_type"] == "code":
            new["execution_count"] = None
        new["id"] = op["id"]
        new["metadata"] = {}
        if op["cell_type"] == "code":
            new["outputs"] = []
        new["source"] = lines(op["source"])
        cells.insert(op["at"], new)
    elif op["mode"] == "delete":
        del cells[op["index"]]
    want = dump(orig, style)
    if want != edited:
        import difflib
        sys.stdout.write("".join(difflib.unified_diff(want.splitlines(True), edited.splitlines(True), "python", "tool")))
        sys.exit(1)
    nbformat.validate(nbformat.reads(edited, as_version=4))
"##;

fn python(args: &[&str]) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PY)
        .args(args)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("No module named 'nbformat'"),
        "Python's nbformat is missing: run `pip install nbformat` (.ci/run installs it)"
    );
    assert!(
        out.status.success(),
        "python {args:?} failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[derive(Default)]
struct Recorder(Mutex<Vec<PathBuf>>);

impl MutationHook for Recorder {
    fn before_write(&self, path: &Path) {
        self.0.lock().unwrap().push(path.to_path_buf());
    }
}

async fn call(ctx: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    let t = ToolRegistry::builtin().get(tool).expect("tool registered");
    t.run(args, ctx).await
}

fn ok(o: &ToolOutput) -> &str {
    assert!(!o.is_error, "expected success, got error: {}", o.text);
    &o.text
}

/// One edit through the tool, then Python's check of the bytes against the file before it.
async fn edit_and_check(c: &ToolContext, file: &Path, style: &str, args: Value, mut op: Value) {
    let before = c.workspace.join("before.json");
    std::fs::copy(file, &before).unwrap();
    let o = call(c, "notebook_edit", args).await;
    let text = ok(&o).to_string();
    if op["mode"] == "insert" {
        // The tool made the id; Python needs it to build the same cell.
        let id = text
            .split("(id ")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .unwrap_or_else(|| panic!("no id in {text}"));
        op["id"] = json!(id);
    }
    python(&[
        "check",
        before.to_str().unwrap(),
        file.to_str().unwrap(),
        &op.to_string(),
        style,
    ]);
}

async fn edit_sequence(c: &ToolContext, name: &str, style: &str) {
    let file = c.workspace.join(name);
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let id1 = nb["cells"][0]["id"].as_str().unwrap().to_string();
    let id2 = nb["cells"][1]["id"].as_str().unwrap().to_string();
    // Replace a code cell by id: source set, outputs and execution count cleared.
    edit_and_check(
        c,
        &file,
        style,
        json!({"path": name, "cell_id": id1, "new_source": "import math\nprint(math.e)\n"}),
        json!({"mode": "replace", "index": 0, "source": "import math\nprint(math.e)\n"}),
    )
    .await;
    // Insert a code cell after cell 2, by number.
    edit_and_check(
        c,
        &file,
        style,
        json!({"path": name, "cell_number": 2, "edit_mode": "insert", "new_source": "y = \"ß\"\nprint(y)"}),
        json!({"mode": "insert", "at": 2, "cell_type": "code", "source": "y = \"ß\"\nprint(y)"}),
    )
    .await;
    // Insert a markdown cell at the start (no cell given).
    edit_and_check(
        c,
        &file,
        style,
        json!({"path": name, "edit_mode": "insert", "cell_type": "markdown", "new_source": "Intro"}),
        json!({"mode": "insert", "at": 0, "cell_type": "markdown", "source": "Intro"}),
    )
    .await;
    // Turn the markdown cell (now cell 3) into code, by id.
    edit_and_check(
        c,
        &file,
        style,
        json!({"path": name, "cell_id": id2, "cell_type": "code", "new_source": "z = 3"}),
        json!({"mode": "replace", "index": 2, "cell_type": "code", "source": "z = 3"}),
    )
    .await;
    // Delete the last cell by number, then the first by id.
    edit_and_check(
        c,
        &file,
        style,
        json!({"path": name, "cell_number": 5, "edit_mode": "delete"}),
        json!({"mode": "delete", "index": 4}),
    )
    .await;
    let now: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let first = now["cells"][0]["id"].as_str().unwrap().to_string();
    edit_and_check(
        c,
        &file,
        style,
        json!({"path": name, "cell_id": first, "edit_mode": "delete"}),
        json!({"mode": "delete", "index": 0}),
    )
    .await;
}

fn setup() -> (tempfile::TempDir, ToolContext, Arc<Recorder>) {
    let d = tempfile::tempdir().unwrap();
    let mut c = ToolContext::new(d.path(), Arc::new(Sandbox::off(d.path())));
    let rec = Arc::new(Recorder::default());
    c.mutation_hook = rec.clone();
    let ws = c.workspace.clone();
    python(&[
        "make",
        ws.join("nb.ipynb").to_str().unwrap(),
        ws.join("custom.ipynb").to_str().unwrap(),
    ]);
    (d, c, rec)
}

#[tokio::test]
async fn edits_match_python_byte_for_byte_and_validate() {
    let (_d, c, rec) = setup();
    edit_sequence(&c, "nb.ipynb", "nbformat").await;
    edit_sequence(&c, "custom.ipynb", "custom").await;
    // Every write went through the mutation path (checkpoints).
    let seen = rec.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 12, "{seen:?}");
    assert!(seen
        .iter()
        .all(|p| p.ends_with("nb.ipynb") || p.ends_with("custom.ipynb")));
}

#[tokio::test]
async fn read_file_shows_cells_and_summarised_outputs() {
    let (_d, c, _) = setup();
    let o = call(&c, "read_file", json!({"path": "nb.ipynb"})).await;
    let t = ok(&o);
    assert!(
        t.starts_with("notebook nb.ipynb: nbformat 4.5, 3 cells, kernel python3\n"),
        "{t}"
    );
    assert!(t.contains(" · code · [1] ──\nimport math\nprint(math.pi)\n  ⇒ stdout: 3.141592653589793\n  ⇒ execute_result [image/png (12 bytes)]: 42\n"), "{t}");
    assert!(
        t.contains(" · markdown ──\n# Überschrift\nText mit Umlauten: äöü\n"),
        "{t}"
    );
    assert!(t.contains("  ⇒ error ValueError: bad\n"), "{t}");
    // offset and limit count cells.
    let o = call(
        &c,
        "read_file",
        json!({"path": "nb.ipynb", "offset": 1, "limit": 1}),
    )
    .await;
    let t = ok(&o);
    assert!(
        t.contains("── cell 2 ") && !t.contains("── cell 1 ") && !t.contains("── cell 3 "),
        "{t}"
    );
    assert!(
        t.ends_with("[more cells below; pass offset=2 to continue]\n"),
        "{t}"
    );
    // A broken notebook is read as text.
    std::fs::write(c.workspace.join("bad.ipynb"), "{not json\n").unwrap();
    let o = call(&c, "read_file", json!({"path": "bad.ipynb"})).await;
    assert_eq!(ok(&o), "1→{not json\n");
}

#[tokio::test]
async fn errors_are_clear_and_leave_the_file_alone() {
    let (_d, c, rec) = setup();
    let file = c.workspace.join("nb.ipynb");
    let orig = std::fs::read(&file).unwrap();
    for (args, want) in [
        (
            json!({"path": "nb.ipynb", "cell_id": "nope", "new_source": "x"}),
            "no cell has id `nope` (ids: ",
        ),
        (
            json!({"path": "nb.ipynb", "cell_number": 9, "new_source": "x"}),
            "cell_number 9 is out of range (the notebook has 3 cells, numbered from 1)",
        ),
        (
            json!({"path": "nb.ipynb", "cell_number": 1}),
            "new_source is required for replace and insert",
        ),
        (
            json!({"path": "nb.ipynb", "edit_mode": "delete"}),
            "delete needs cell_id or cell_number",
        ),
        (
            json!({"path": "nb.ipynb", "cell_number": 1, "edit_mode": "move", "new_source": "x"}),
            "unknown edit_mode `move`",
        ),
        (
            json!({"path": "../out.ipynb", "cell_number": 1, "new_source": "x"}),
            "outside the writable roots",
        ),
    ] {
        let o = call(&c, "notebook_edit", args).await;
        assert!(
            o.is_error && o.text.contains(want),
            "{} lacks {want}",
            o.text
        );
    }
    std::fs::write(c.workspace.join("a.txt"), "x").unwrap();
    let o = call(
        &c,
        "notebook_edit",
        json!({"path": "a.txt", "cell_number": 1, "new_source": "x"}),
    )
    .await;
    assert!(
        o.is_error && o.text.contains("is not a notebook"),
        "{}",
        o.text
    );
    std::fs::write(
        c.workspace.join("v3.ipynb"),
        r#"{"nbformat": 3, "worksheets": []}"#,
    )
    .unwrap();
    let o = call(
        &c,
        "notebook_edit",
        json!({"path": "v3.ipynb", "cell_number": 1, "new_source": "x"}),
    )
    .await;
    assert!(
        o.is_error && o.text.contains("nbformat 3 is not supported"),
        "{}",
        o.text
    );
    assert_eq!(std::fs::read(&file).unwrap(), orig);
    assert!(rec.0.lock().unwrap().is_empty());
}

#[test]
fn edit_rules_cover_notebook_edit() {
    let ws = tempfile::tempdir().unwrap();
    let p = Policy::new(
        Mode::Ask,
        &["Edit(*.ipynb)".to_string()],
        &[],
        &["Edit(secret/**)".to_string()],
    )
    .unwrap()
    .with_workspace(ws.path());
    assert_eq!(
        p.decide("notebook_edit", &json!({"path": "a.ipynb"}), false),
        Decision::Allow
    );
    assert!(matches!(
        p.decide("notebook_edit", &json!({"path": "secret/a.ipynb"}), false),
        Decision::Deny { .. }
    ));
    let plain = Policy::new(Mode::Ask, &[], &[], &[]).unwrap();
    assert!(matches!(
        plain.decide("notebook_edit", &json!({"path": "a.ipynb"}), false),
        Decision::Ask { .. }
    ));
}
