//! The binary's allocator: mimalloc, asked the way its fast path expects. Rust passes every
//! allocation with its alignment. mimalloc's aligned entry serves a block from its fast path
//! only when it is at most 1 KiB and happens to sit on that alignment; any other goes down its
//! generic path, and one whose size does not imply its alignment is over-allocated by the
//! alignment, leaving an inner pointer that its free must undo. Alignments of 16 and less,
//! which its plain `malloc` already guarantees for such sizes, go there instead, as the glue
//! in `std` does with the system's `malloc`.

use std::{
    alloc::{GlobalAlloc, Layout},
    ffi::c_void,
};

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// What mimalloc's `malloc` aligns every block of at least that size to.
const PLAIN_ALIGN: usize = 16;

/// mimalloc as the global allocator.
pub struct Mimalloc;

/// Whether `mi_malloc` of `size` bytes is aligned to `align`: every block of 16 bytes or more
/// is on 16, and one smaller (8) is on 8; a layout's size is a multiple of its alignment.
fn plain(align: usize, size: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks of its
// plain and aligned entries alike); a plain entry is used only where its alignment holds.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = if plain(layout.align(), layout.size()) {
            unsafe { mi_malloc(layout.size()) }
        } else {
            unsafe { mi_malloc_aligned(layout.size(), layout.align()) }
        };
        block.cast()
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = if plain(layout.align(), layout.size()) {
            unsafe { mi_zalloc(layout.size()) }
        } else {
            unsafe { mi_zalloc_aligned(layout.size(), layout.align()) }
        };
        block.cast()
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let block = if plain(layout.align(), new_size) {
            unsafe { mi_realloc(ptr.cast::<c_void>(), new_size) }
        } else {
            unsafe { mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()) }
        };
        block.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every size up to 64 bytes and of sizes about mimalloc's classes up to
    /// 64 KiB, at every alignment up to 4 KiB, are on their alignment, keep what was written
    /// in them when grown and shrunk, and come zeroed when asked so.
    #[test]
    fn blocks_are_aligned_and_keep_their_bytes() {
        let sizes = (1usize..=64).chain([96, 100, 1000, 1024, 1025, 4000, 8192, 8199, 65_536]);
        for size in sizes {
            for shift in 0..=12 {
                let align = 1usize << shift;
                let Ok(layout) = Layout::from_size_align(size.next_multiple_of(align), align)
                else {
                    continue;
                };
                unsafe {
                    let block = Mimalloc.alloc(layout);
                    assert!(!block.is_null());
                    assert_eq!(block as usize % align, 0, "{layout:?}");
                    block.write_bytes(0xa5, layout.size());
                    let grown_size = (layout.size() * 3).next_multiple_of(align);
                    let grown = Mimalloc.realloc(block, layout, grown_size);
                    assert_eq!(grown as usize % align, 0, "{layout:?} grown");
                    assert!((0..layout.size()).all(|i| *grown.add(i) == 0xa5));
                    let grown_layout = Layout::from_size_align(grown_size, align).unwrap();
                    let shrunk = Mimalloc.realloc(grown, grown_layout, align);
                    assert_eq!(shrunk as usize % align, 0, "{layout:?} shrunk");
                    assert!((0..align.min(layout.size())).all(|i| *shrunk.add(i) == 0xa5));
                    Mimalloc.dealloc(shrunk, Layout::from_size_align(align, align).unwrap());
                    let zeroed = Mimalloc.alloc_zeroed(layout);
                    assert_eq!(zeroed as usize % align, 0, "{layout:?} zeroed");
                    assert!((0..layout.size()).all(|i| *zeroed.add(i) == 0));
                    Mimalloc.dealloc(zeroed, layout);
                }
            }
        }
    }
}
