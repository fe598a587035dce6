//! Splitting ssh_config lines the way OpenSSH does (`strdelim`, `argv_split`).

/// OpenSSH's `argv_split` with comment termination: words separated by spaces or tabs,
/// `"` and `'` quote, `\` escapes a quote, a backslash or (outside quotes) a space, and a word
/// that starts with `#` ends the line.
pub(super) fn argv_split(s: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == ' ' || c == '\t' {
            i += 1;
            continue;
        }
        if c == '#' {
            break;
        }
        let mut arg = String::new();
        let mut quote: Option<char> = None;
        while i < chars.len() {
            let c = chars[i];
            if c == '\\' {
                match chars.get(i + 1) {
                    Some(&n)
                        if n == '\'' || n == '"' || n == '\\' || (quote.is_none() && n == ' ') =>
                    {
                        arg.push(n);
                        i += 2;
                    }
                    _ => {
                        arg.push('\\');
                        i += 1;
                    }
                }
                continue;
            }
            match quote {
                None if c == ' ' || c == '\t' => break,
                None if c == '"' || c == '\'' => quote = Some(c),
                Some(q) if c == q => quote = None,
                _ => arg.push(c),
            }
            i += 1;
        }
        if quote.is_some() {
            return Err("unterminated quote".into());
        }
        out.push(arg);
    }
    Ok(out)
}

/// Split `Key Value`, `Key=Value` or `Key = Value` into the keyword and the rest (OpenSSH's
/// `strdelim`: whitespace and at most one `=` separate them).
pub(super) fn split_keyword(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start_matches([' ', '\t']);
    let end = line.find([' ', '\t', '='])?;
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches([' ', '\t']);
    if let Some(r) = rest.strip_prefix('=') {
        rest = r;
    }
    Some((key, rest.trim_start_matches([' ', '\t'])))
}
