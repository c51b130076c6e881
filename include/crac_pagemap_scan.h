/* crac_pagemap_scan.h — the PAGEMAP_SCAN ioctl of /proc/PID/pagemap (Linux 6.7 uapi, linux/fs.h),
 * for build hosts whose headers are older (Debian 12's): incremental checkpoints and bench/. */
#ifndef CRAC_PAGEMAP_SCAN_H
#define CRAC_PAGEMAP_SCAN_H

#include <stdint.h>
#include <sys/ioctl.h>

struct page_region_ {
    uint64_t start, end, categories;
};
struct pm_scan_arg_ {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
        category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN_ _IOWR('f', 16, struct pm_scan_arg_)
#define PAGE_IS_WRITTEN_ (1ULL << 1)
#define PAGE_IS_PRESENT_ (1ULL << 3)
#define PM_SCAN_WP_MATCHING_ 1ULL
#define PM_SCAN_CHECK_WPASYNC_ 2ULL

#endif
