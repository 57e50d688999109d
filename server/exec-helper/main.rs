//! The exec helper: the program the server starts each child through, so
//! that the child dies with the server (`PR_SET_PDEATHSIG`) without the
//! server forking itself. `server/build.rs` compiles it, the server embeds
//! the result and runs it from a sealed in-memory file
//! (`src/supervise/exec_helper.rs`).
//!
//! Its whole work, with the arguments the server's trampoline takes
//! (`src/supervise/trampoline.rs`):
//! `<helper> __exec-child <server pid> <program> <argv0> <args>...`: ask
//! for `SIGKILL` at the parent's death, check that the parent is still the
//! server (if the server died first, no signal would come: run nothing),
//! and exec `program` in place with `argv0` and `args` and the environment
//! as given. Without arguments it exits 0: the server's check, at start,
//! that it can run the helper on this host.
//!
//! Why a separate program of its own rather than the server's binary
//! (which can do the same): this one has no C library and no dynamic
//! loader, so the kernel maps a page and jumps to it. Starting the server's
//! own binary costs a dynamic loader, its relocations and glibc's start-up
//! (which probes the CPU with instructions a virtual machine traps); for
//! every session started.
//!
//! No C library: a few system calls made directly (the `sys` module, for
//! x86_64: the one architecture the build script compiles it for, because
//! the one the tests run on) and no allocation. Error messages are written with
//! one `writev`, as std's `io::Error` would show them, to the child's
//! stderr, which the server keeps the tail of; the exit code is then 127,
//! as a shell's.

#![no_std]
#![no_main]

use core::ffi::c_char;
use core::mem::MaybeUninit;

/// The exit code of a start that could not exec.
const EXEC_FAILED: usize = 127;
const PR_SET_PDEATHSIG: usize = 1;
const SIGKILL: usize = 9;
const STDERR: usize = 2;

/// What every message starts with (the server binary's trampoline says the
/// same).
const PREFIX: &[u8] = b"agent-harness __exec-child: ";
const USAGE: &[u8] = b"usage: __exec-child <server pid> <program> <argv0> [args]...";

#[cfg(target_arch = "x86_64")]
mod sys {
    pub const WRITEV: usize = 20;
    pub const GETPPID: usize = 110;
    pub const PRCTL: usize = 157;
    pub const EXECVE: usize = 59;
    pub const EXIT_GROUP: usize = 231;

    // The kernel starts the program with the stack pointer at argc; the
    // ABI wants it 16-byte aligned at a call.
    core::arch::global_asm!(
        ".globl _start",
        "_start:",
        "xor ebp, ebp",
        "mov rdi, rsp",
        "and rsp, -16",
        "call {main}",
        "ud2",
        main = sym super::start,
    );

    /// A system call of up to three arguments: the result, or `-errno`.
    ///
    /// # Safety
    /// The arguments must be valid for call `n`.
    pub unsafe fn call(n: usize, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: the caller's; `syscall` clobbers rcx and r11 only.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }
}

/// Entered from `_start` with the initial stack: argc, the argument
/// pointers and a null, the environment's pointers and a null.
///
/// # Safety
/// `sp` must be the kernel's initial stack pointer.
unsafe extern "C" fn start(sp: *const usize) -> ! {
    // SAFETY: the layout the kernel gives every program (see above).
    let (argc, argv) = unsafe { (*sp, sp.add(1) as *const *const c_char) };
    // SAFETY: the environment's pointers follow argv's null.
    let envp = unsafe { argv.add(argc + 1) };
    if argc == 1 {
        exit(0);
    }
    if argc < 5 {
        fail(&[USAGE], None);
    }
    // SAFETY: argv holds argc pointers to NUL-terminated strings.
    let arg = |i: usize| unsafe { bytes(*argv.add(i)) };
    let Some(server) = parse_pid(arg(2)) else {
        fail(&[USAGE], None);
    };
    // SAFETY: prctl with integer arguments.
    let r = unsafe { sys::call(sys::PRCTL, PR_SET_PDEATHSIG, SIGKILL, 0) };
    if r < 0 {
        fail(&[b"PR_SET_PDEATHSIG"], Some(r));
    }
    // The server may have died before the prctl: we were re-parented
    // already and no signal will come.
    // SAFETY: getppid takes no arguments.
    if unsafe { sys::call(sys::GETPPID, 0, 0, 0) } as usize != server {
        fail(&[b"the server that started this child is gone"], None);
    }
    // argv[4] is the new argv[0]; the arrays stay null-terminated.
    // SAFETY: a path and two null-terminated arrays of C strings.
    let r = unsafe {
        sys::call(
            sys::EXECVE,
            *argv.add(3) as usize,
            argv.add(4) as usize,
            envp as usize,
        )
    };
    fail(&[b"exec ", arg(3)], Some(r))
}

/// A C string's bytes, without its NUL.
///
/// # Safety
/// `s` must point to a NUL-terminated string that outlives the result.
unsafe fn bytes<'a>(s: *const c_char) -> &'a [u8] {
    let mut n = 0;
    // Read volatile: a plain loop may be compiled into a call to `strlen`,
    // which this program (no C library) does not have.
    // SAFETY: within the string, up to its NUL.
    while unsafe { core::ptr::read_volatile(s.add(n)) } != 0 {
        n += 1;
    }
    // SAFETY: the n bytes before the NUL.
    unsafe { core::slice::from_raw_parts(s as *const u8, n) }
}

/// A positive decimal pid.
fn parse_pid(text: &[u8]) -> Option<usize> {
    if text.is_empty() || text.len() > 10 {
        return None;
    }
    let mut pid = 0usize;
    for &b in text {
        if !b.is_ascii_digit() {
            return None;
        }
        pid = pid * 10 + (b - b'0') as usize;
    }
    (pid > 0).then_some(pid)
}

/// What std's `io::Error` says for the errors exec and prctl give.
fn describe(errno: usize) -> &'static [u8] {
    match errno {
        1 => b"Operation not permitted",
        2 => b"No such file or directory",
        7 => b"Argument list too long",
        8 => b"Exec format error",
        12 => b"Cannot allocate memory",
        13 => b"Permission denied",
        14 => b"Bad address",
        20 => b"Not a directory",
        21 => b"Is a directory",
        22 => b"Invalid argument",
        24 => b"Too many open files",
        26 => b"Text file busy",
        36 => b"File name too long",
        40 => b"Too many levels of symbolic links",
        _ => b"Unknown error",
    }
}

/// Writes `PREFIX`, the parts and, for a failed call's `-errno`,
/// `: <description> (os error N)`, then a newline, to stderr in one write;
/// exits 127.
fn fail(parts: &[&[u8]], result: Option<isize>) -> ! {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    // Not zeroed first: that would be a call to `memset`, which this
    // program does not have. Only the first n are passed on.
    let mut iov = [const { MaybeUninit::<(usize, usize)>::uninit() }; 10];
    let mut n = 0;
    let mut push = |s: &[u8]| {
        if n < iov.len() {
            iov[n].write((s.as_ptr() as usize, s.len()));
            n += 1;
        }
    };
    push(PREFIX);
    for p in parts {
        push(p);
    }
    if let Some(r) = result {
        let errno = r.unsigned_abs();
        let mut v = errno;
        loop {
            at -= 1;
            digits[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        push(b": ");
        push(describe(errno));
        push(b" (os error ");
        push(&digits[at..]);
        push(b")");
    }
    push(b"\n");
    // SAFETY: n (pointer, length) pairs, each a live byte slice: the
    // layout of `struct iovec`.
    unsafe { sys::call(sys::WRITEV, STDERR, iov.as_ptr() as usize, n) };
    exit(EXEC_FAILED)
}

fn exit(code: usize) -> ! {
    // SAFETY: exit_group with an integer argument does not return.
    unsafe { sys::call(sys::EXIT_GROUP, code, 0, 0) };
    loop {}
}

/// Named by `core`'s unwinding tables; never called: panics abort (the
/// panic handler exits) and nothing unwinds.
#[unsafe(no_mangle)]
extern "C" fn rust_eh_personality() {}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    exit(EXEC_FAILED)
}
