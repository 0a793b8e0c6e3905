//! The zlib API that `flate2` calls through `libz-ng-sys` (zlib-compatible types: sizes and
//! checksums are `unsigned long`), served by zlib-rs instead of the C zlib-ng, so the build
//! needs no cmake.
//!
//! Each function forwards to `libz-rs-sys`. Its `z_stream` has the same `#[repr(C)]` layout
//! as the one declared here (the allocator fields are `Option` of the same function pointers,
//! which the niche makes the same size), so a pointer to one is a pointer to the other; the
//! test below checks the layout field by field.
#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int, c_uint, c_ulong, c_void};

use libz_rs_sys as rs;

pub type alloc_func = unsafe extern "C" fn(voidpf, uInt, uInt) -> voidpf;
pub type free_func = unsafe extern "C" fn(voidpf, voidpf);
pub type Bytef = u8;
pub type uInt = c_uint;
pub type uLong = c_ulong;
pub type voidpf = *mut c_void;
pub enum internal_state {}

#[repr(C)]
#[derive(Copy, Clone)]
pub struct z_stream {
    pub next_in: *mut Bytef,
    pub avail_in: uInt,
    pub total_in: uLong,
    pub next_out: *mut Bytef,
    pub avail_out: uInt,
    pub total_out: uLong,
    pub msg: *mut c_char,
    pub state: *mut internal_state,
    pub zalloc: alloc_func,
    pub zfree: free_func,
    pub opaque: voidpf,
    pub data_type: c_int,
    pub adler: uLong,
    pub reserved: uLong,
}
pub type z_streamp = *mut z_stream;

pub const Z_NO_FLUSH: c_int = 0;
pub const Z_PARTIAL_FLUSH: c_int = 1;
pub const Z_SYNC_FLUSH: c_int = 2;
pub const Z_FULL_FLUSH: c_int = 3;
pub const Z_FINISH: c_int = 4;
pub const Z_BLOCK: c_int = 5;
pub const Z_TREES: c_int = 6;

pub const Z_OK: c_int = 0;
pub const Z_STREAM_END: c_int = 1;
pub const Z_NEED_DICT: c_int = 2;
pub const Z_ERRNO: c_int = -1;
pub const Z_STREAM_ERROR: c_int = -2;
pub const Z_DATA_ERROR: c_int = -3;
pub const Z_MEM_ERROR: c_int = -4;
pub const Z_BUF_ERROR: c_int = -5;
pub const Z_VERSION_ERROR: c_int = -6;

pub const Z_NO_COMPRESSION: c_int = 0;
pub const Z_BEST_SPEED: c_int = 1;
pub const Z_BEST_COMPRESSION: c_int = 9;
pub const Z_DEFAULT_COMPRESSION: c_int = -1;

pub const Z_FILTERED: c_int = 1;
pub const Z_HUFFMAN_ONLY: c_int = 2;
pub const Z_RLE: c_int = 3;
pub const Z_FIXED: c_int = 4;
pub const Z_DEFAULT_STRATEGY: c_int = 0;

pub const Z_BINARY: c_int = 0;
pub const Z_TEXT: c_int = 1;
pub const Z_ASCII: c_int = Z_TEXT;
pub const Z_UNKNOWN: c_int = 2;

pub const Z_DEFLATED: c_int = 8;

/// The stream as zlib-rs declares it.
fn rs(strm: z_streamp) -> rs::z_streamp {
    strm.cast()
}

pub unsafe extern "C" fn deflate(strm: z_streamp, flush: c_int) -> c_int {
    unsafe { rs::deflate(rs(strm), flush) }
}

pub unsafe extern "C" fn deflateEnd(strm: z_streamp) -> c_int {
    unsafe { rs::deflateEnd(rs(strm)) }
}

pub unsafe extern "C" fn deflateReset(strm: z_streamp) -> c_int {
    unsafe { rs::deflateReset(rs(strm)) }
}

pub unsafe extern "C" fn deflateParams(strm: z_streamp, level: c_int, strategy: c_int) -> c_int {
    unsafe { rs::deflateParams(rs(strm), level, strategy) }
}

pub unsafe extern "C" fn deflateSetDictionary(
    strm: z_streamp,
    dictionary: *const Bytef,
    dictLength: uInt,
) -> c_int {
    unsafe { rs::deflateSetDictionary(rs(strm), dictionary, dictLength) }
}

pub unsafe extern "C" fn deflateInit2_(
    strm: z_streamp,
    level: c_int,
    method: c_int,
    windowBits: c_int,
    memLevel: c_int,
    strategy: c_int,
    version: *const c_char,
    stream_size: c_int,
) -> c_int {
    unsafe {
        rs::deflateInit2_(
            rs(strm),
            level,
            method,
            windowBits,
            memLevel,
            strategy,
            version,
            stream_size,
        )
    }
}

pub unsafe extern "C" fn inflate(strm: z_streamp, flush: c_int) -> c_int {
    unsafe { rs::inflate(rs(strm), flush) }
}

pub unsafe extern "C" fn inflateEnd(strm: z_streamp) -> c_int {
    unsafe { rs::inflateEnd(rs(strm)) }
}

pub unsafe extern "C" fn inflateReset2(strm: z_streamp, windowBits: c_int) -> c_int {
    unsafe { rs::inflateReset2(rs(strm), windowBits) }
}

pub unsafe extern "C" fn inflateSetDictionary(
    strm: z_streamp,
    dictionary: *const Bytef,
    dictLength: uInt,
) -> c_int {
    unsafe { rs::inflateSetDictionary(rs(strm), dictionary, dictLength) }
}

pub unsafe extern "C" fn inflateInit2_(
    strm: z_streamp,
    windowBits: c_int,
    version: *const c_char,
    stream_size: c_int,
) -> c_int {
    unsafe { rs::inflateInit2_(rs(strm), windowBits, version, stream_size) }
}

pub extern "C" fn zlibVersion() -> *const c_char {
    rs::zlibVersion()
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    #[test]
    fn the_stream_is_laid_out_as_zlib_rs_reads_it() {
        assert_eq!(size_of::<z_stream>(), size_of::<rs::z_stream>());
        assert_eq!(align_of::<z_stream>(), align_of::<rs::z_stream>());
        macro_rules! same_offset {
            ($($field:ident),*) => {$(
                assert_eq!(
                    offset_of!(z_stream, $field),
                    offset_of!(rs::z_stream, $field),
                    stringify!($field)
                );
            )*};
        }
        same_offset!(
            next_in, avail_in, total_in, next_out, avail_out, total_out, msg, state, zalloc, zfree,
            opaque, data_type, adler, reserved
        );
    }

    /// A round trip through deflate and inflate, as flate2 drives them.
    #[test]
    fn deflate_then_inflate_gives_the_input_back() {
        unsafe extern "C" fn zalloc(_: voidpf, items: uInt, size: uInt) -> voidpf {
            unsafe { libc_calloc(items as usize, size as usize) }
        }
        unsafe extern "C" fn zfree(_: voidpf, address: voidpf) {
            unsafe { libc_free(address) }
        }
        unsafe extern "C" {
            #[link_name = "calloc"]
            fn libc_calloc(count: usize, size: usize) -> voidpf;
            #[link_name = "free"]
            fn libc_free(address: voidpf);
        }
        let fresh = || z_stream {
            next_in: std::ptr::null_mut(),
            avail_in: 0,
            total_in: 0,
            next_out: std::ptr::null_mut(),
            avail_out: 0,
            total_out: 0,
            msg: std::ptr::null_mut(),
            state: std::ptr::null_mut(),
            zalloc,
            zfree,
            opaque: std::ptr::null_mut(),
            data_type: 0,
            adler: 0,
            reserved: 0,
        };
        let input = b"switchyard ".repeat(100);
        let mut packed = vec![0u8; 4096];
        let mut stream = fresh();
        let size = size_of::<z_stream>() as c_int;
        unsafe {
            let window = 15;
            let made = deflateInit2_(
                &mut stream,
                6,
                Z_DEFLATED,
                window,
                8,
                0,
                zlibVersion(),
                size,
            );
            assert_eq!(made, Z_OK);
            stream.next_in = input.as_ptr().cast_mut();
            stream.avail_in = input.len() as uInt;
            stream.next_out = packed.as_mut_ptr();
            stream.avail_out = packed.len() as uInt;
            assert_eq!(deflate(&mut stream, Z_FINISH), Z_STREAM_END);
            packed.truncate(stream.total_out as usize);
            assert_eq!(deflateEnd(&mut stream), Z_OK);
        }
        assert!(packed.len() < input.len() / 10, "{} bytes", packed.len());
        let mut unpacked = vec![0u8; input.len()];
        let mut stream = fresh();
        unsafe {
            assert_eq!(inflateInit2_(&mut stream, 15, zlibVersion(), size), Z_OK);
            stream.next_in = packed.as_mut_ptr();
            stream.avail_in = packed.len() as uInt;
            stream.next_out = unpacked.as_mut_ptr();
            stream.avail_out = unpacked.len() as uInt;
            assert_eq!(inflate(&mut stream, Z_FINISH), Z_STREAM_END);
            assert_eq!(inflateEnd(&mut stream), Z_OK);
        }
        assert_eq!(unpacked, input);
    }
}
