//! What the local Unix system says: password database, host name, services, numeric addresses.

use std::path::PathBuf;

pub(crate) fn service_port(name: &str) -> Option<u16> {
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: getservbyname reads the two NUL-terminated strings and returns a pointer into
    // static storage (or null); we copy the port out right away.
    unsafe {
        let se = libc::getservbyname(cname.as_ptr(), c"tcp".as_ptr());
        if se.is_null() {
            return None;
        }
        let port = u16::from_be((*se).s_port as u16);
        (port != 0).then_some(port)
    }
}

/// The calling user's name and home from the password database.
pub(crate) fn passwd_entry() -> (Option<String>, Option<PathBuf>) {
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy both strings
    // out immediately, before any other call that could overwrite that storage.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() {
            return (None, None);
        }
        let cstr = |p: *const libc::c_char| {
            (!p.is_null())
                .then(|| {
                    std::ffi::CStr::from_ptr(p)
                        .to_str()
                        .ok()
                        .map(str::to_string)
                })
                .flatten()
        };
        (cstr((*pw).pw_name), cstr((*pw).pw_dir).map(PathBuf::from))
    }
}

pub(crate) fn home_of(user: &str) -> Option<PathBuf> {
    let cname = std::ffi::CString::new(user).ok()?;
    // SAFETY: as in `passwd_entry`; the directory string is copied out at once.
    unsafe {
        let pw = libc::getpwnam(cname.as_ptr());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_str()
            .ok()
            .map(PathBuf::from)
    }
}

pub(crate) fn local_user() -> String {
    if let (Some(name), _) = passwd_entry() {
        return name;
    }
    match std::env::var("USER") {
        Ok(u) if !u.is_empty() => u,
        _ => "root".to_string(),
    }
}

pub(crate) fn local_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub(crate) fn default_home() -> PathBuf {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => passwd_entry().1.unwrap_or_else(|| PathBuf::from("/")),
    }
}

/// This machine's host name (`%l`) as `gethostname` reports it.
pub(crate) fn this_host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // (we also stop at the buffer end).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// OpenSSH's `is_addr` + `resolve_addr`: a numeric address in its canonical text form.
pub(crate) fn canonical_address(host: &str) -> Option<String> {
    let c = std::ffi::CString::new(host).ok()?;
    // SAFETY: standard getaddrinfo/getnameinfo use: hints zeroed, result freed on every path,
    // output buffer sized NI_MAXHOST and NUL-terminated by getnameinfo on success.
    unsafe {
        let mut hints: libc::addrinfo = std::mem::zeroed();
        hints.ai_family = libc::AF_UNSPEC;
        hints.ai_flags = libc::AI_NUMERICHOST;
        let mut res: *mut libc::addrinfo = std::ptr::null_mut();
        if libc::getaddrinfo(c.as_ptr(), std::ptr::null(), &hints, &mut res) != 0 || res.is_null() {
            return None;
        }
        let mut buf = [0 as libc::c_char; 1025];
        let rc = libc::getnameinfo(
            (*res).ai_addr,
            (*res).ai_addrlen,
            buf.as_mut_ptr(),
            buf.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NUMERICHOST,
        );
        libc::freeaddrinfo(res);
        if rc != 0 {
            return None;
        }
        std::ffi::CStr::from_ptr(buf.as_ptr())
            .to_str()
            .ok()
            .map(str::to_string)
    }
}
