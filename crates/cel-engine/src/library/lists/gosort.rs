//! Go's `sort.Slice` (Go 1.27 `sort/zsortfunc.go`, pattern-defeating quicksort), ported step
//! for step: cel-go sorts with it (`sort()`, `sortBy`), and it is not stable, so elements with
//! equal keys (and NaNs, which are never less) end where Go's algorithm puts them, which only
//! the same algorithm reproduces.

type Less<'a, T> = &'a mut dyn FnMut(&T, &T) -> bool;

/// `sort.Slice(v, less)`.
pub(crate) fn sort_slice<T>(v: &mut [T], less: Less<'_, T>) {
    let n = v.len();
    let limit = usize::BITS - n.leading_zeros();
    pdqsort(v, less, 0, n, limit);
}

fn lt<T>(v: &[T], less: &mut dyn FnMut(&T, &T) -> bool, i: usize, j: usize) -> bool {
    less(&v[i], &v[j])
}

fn insertion_sort<T>(v: &mut [T], less: Less<'_, T>, a: usize, b: usize) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && lt(v, less, j, j - 1) {
            v.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sift_down<T>(v: &mut [T], less: Less<'_, T>, lo: usize, hi: usize, first: usize) {
    let mut root = lo;
    loop {
        let mut child = 2 * root + 1;
        if child >= hi {
            break;
        }
        if child + 1 < hi && lt(v, less, first + child, first + child + 1) {
            child += 1;
        }
        if !lt(v, less, first + root, first + child) {
            return;
        }
        v.swap(first + root, first + child);
        root = child;
    }
}

fn heap_sort<T>(v: &mut [T], less: Less<'_, T>, a: usize, b: usize) {
    let first = a;
    let hi = b - a;
    let mut i = (hi as isize - 1) / 2;
    while i >= 0 {
        sift_down(v, less, i as usize, hi, first);
        i -= 1;
    }
    let mut i = hi as isize - 1;
    while i >= 0 {
        v.swap(first, first + i as usize);
        sift_down(v, less, 0, i as usize, first);
        i -= 1;
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

fn pdqsort<T>(v: &mut [T], less: Less<'_, T>, mut a: usize, mut b: usize, mut limit: u32) {
    const MAX_INSERTION: usize = 12;
    let mut was_balanced = true;
    let mut was_partitioned = true;
    loop {
        let length = b - a;
        if length <= MAX_INSERTION {
            insertion_sort(v, less, a, b);
            return;
        }
        if limit == 0 {
            heap_sort(v, less, a, b);
            return;
        }
        if !was_balanced {
            break_patterns(v, a, b);
            limit -= 1;
        }
        let (mut pivot, mut hint) = choose_pivot(v, less, a, b);
        if hint == Hint::Decreasing {
            reverse_range(v, a, b);
            pivot = (b - 1) - (pivot - a);
            hint = Hint::Increasing;
        }
        if was_balanced
            && was_partitioned
            && hint == Hint::Increasing
            && partial_insertion_sort(v, less, a, b)
        {
            return;
        }
        if a > 0 && !lt(v, less, a - 1, pivot) {
            a = partition_equal(v, less, a, b, pivot);
            continue;
        }
        let (mid, already_partitioned) = partition(v, less, a, b, pivot);
        was_partitioned = already_partitioned;
        let (left_len, right_len) = (mid - a, b - mid);
        let balance_threshold = length / 8;
        if left_len < right_len {
            was_balanced = left_len >= balance_threshold;
            pdqsort(v, less, a, mid, limit);
            a = mid + 1;
        } else {
            was_balanced = right_len >= balance_threshold;
            pdqsort(v, less, mid + 1, b, limit);
            b = mid;
        }
    }
}

fn partition<T>(v: &mut [T], less: Less<'_, T>, a: usize, b: usize, pivot: usize) -> (usize, bool) {
    v.swap(a, pivot);
    // i and j inclusive; j may go one below a + 1 (Go's ints), hence isize.
    let (mut i, mut j) = (a as isize + 1, b as isize - 1);
    while i <= j && lt(v, less, i as usize, a) {
        i += 1;
    }
    while i <= j && !lt(v, less, j as usize, a) {
        j -= 1;
    }
    if i > j {
        v.swap(j as usize, a);
        return (j as usize, true);
    }
    v.swap(i as usize, j as usize);
    i += 1;
    j -= 1;
    loop {
        while i <= j && lt(v, less, i as usize, a) {
            i += 1;
        }
        while i <= j && !lt(v, less, j as usize, a) {
            j -= 1;
        }
        if i > j {
            break;
        }
        v.swap(i as usize, j as usize);
        i += 1;
        j -= 1;
    }
    v.swap(j as usize, a);
    (j as usize, false)
}

fn partition_equal<T>(v: &mut [T], less: Less<'_, T>, a: usize, b: usize, pivot: usize) -> usize {
    v.swap(a, pivot);
    let (mut i, mut j) = (a as isize + 1, b as isize - 1);
    loop {
        while i <= j && !lt(v, less, a, i as usize) {
            i += 1;
        }
        while i <= j && lt(v, less, a, j as usize) {
            j -= 1;
        }
        if i > j {
            break;
        }
        v.swap(i as usize, j as usize);
        i += 1;
        j -= 1;
    }
    i as usize
}

fn partial_insertion_sort<T>(v: &mut [T], less: Less<'_, T>, a: usize, b: usize) -> bool {
    const MAX_STEPS: usize = 5;
    const SHORTEST_SHIFTING: usize = 50;
    let mut i = a + 1;
    for _ in 0..MAX_STEPS {
        while i < b && !lt(v, less, i, i - 1) {
            i += 1;
        }
        if i == b {
            return true;
        }
        if b - a < SHORTEST_SHIFTING {
            return false;
        }
        v.swap(i, i - 1);
        if i - a >= 2 {
            let mut j = i - 1;
            while j >= 1 {
                if !lt(v, less, j, j - 1) {
                    break;
                }
                v.swap(j, j - 1);
                j -= 1;
            }
        }
        if b - i >= 2 {
            let mut j = i + 1;
            while j < b {
                if !lt(v, less, j, j - 1) {
                    break;
                }
                v.swap(j, j - 1);
                j += 1;
            }
        }
    }
    false
}

fn break_patterns<T>(v: &mut [T], a: usize, b: usize) {
    let length = b - a;
    if length >= 8 {
        let mut random = length as u64;
        let modulus = 1u64 << (usize::BITS - length.leading_zeros());
        let start = a + (length / 4) * 2 - 1;
        for idx in start..=a + (length / 4) * 2 + 1 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            let mut other = (random & (modulus - 1)) as usize;
            if other >= length {
                other -= length;
            }
            v.swap(idx, a + other);
        }
    }
}

fn choose_pivot<T>(v: &mut [T], less: Less<'_, T>, a: usize, b: usize) -> (usize, Hint) {
    const SHORTEST_NINTHER: usize = 50;
    const MAX_SWAPS: usize = 4 * 3;
    let l = b - a;
    let mut swaps = 0;
    let mut i = a + l / 4;
    let mut j = a + l / 4 * 2;
    let mut k = a + l / 4 * 3;
    if l >= 8 {
        if l >= SHORTEST_NINTHER {
            i = median(v, less, i - 1, i, i + 1, &mut swaps);
            j = median(v, less, j - 1, j, j + 1, &mut swaps);
            k = median(v, less, k - 1, k, k + 1, &mut swaps);
        }
        j = median(v, less, i, j, k, &mut swaps);
    }
    match swaps {
        0 => (j, Hint::Increasing),
        MAX_SWAPS => (j, Hint::Decreasing),
        _ => (j, Hint::Unknown),
    }
}

fn order2<T>(v: &[T], less: Less<'_, T>, a: usize, b: usize, swaps: &mut usize) -> (usize, usize) {
    if lt(v, less, b, a) {
        *swaps += 1;
        return (b, a);
    }
    (a, b)
}

fn median<T>(v: &[T], less: Less<'_, T>, a: usize, b: usize, c: usize, swaps: &mut usize) -> usize {
    let (a, b) = order2(v, less, a, b, swaps);
    let (b, c) = order2(v, less, b, c, swaps);
    let _ = c;
    let (_, b) = order2(v, less, a, b, swaps);
    b
}

fn reverse_range<T>(v: &mut [T], a: usize, b: usize) {
    v[a..b].reverse();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pseudo-random sequence (Go's xorshift, for reproducibility).
    fn sequence(n: usize, seed: u64, modulo: u64) -> Vec<u64> {
        let mut r = seed;
        (0..n)
            .map(|_| {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                r % modulo
            })
            .collect()
    }

    #[test]
    fn sorts_like_a_sort() {
        for (n, m) in [(0, 1), (1, 1), (5, 3), (13, 5), (60, 7), (1000, 1000), (10_000, 10), (5000, 1)] {
            let mut v = sequence(n, 88172645463325252, m);
            let mut want = v.clone();
            want.sort();
            sort_slice(&mut v, &mut |a, b| a < b);
            assert_eq!(v, want, "n={n}");
        }
        // Already sorted, reversed, sawtooth.
        for mut v in [
            (0..1000u64).collect::<Vec<_>>(),
            (0..1000u64).rev().collect(),
            (0..1000u64).map(|i| i % 17).collect(),
        ] {
            let mut want = v.clone();
            want.sort();
            sort_slice(&mut v, &mut |a, b| a < b);
            assert_eq!(v, want);
        }
    }

    #[test]
    fn equal_keys_keep_go_s_order() {
        // Go 1.27's sort.Slice on (key, id) pairs by key only, keys from `sequence`: the
        // FNV-style hash of the resulting ids, as a Go program printed it.
        let cases: [(usize, u64, u64, u64); 6] = [
            (20, 3, 0, 8489678592770193293),
            (100, 5, 1, 8031008609458160597),
            (1000, 7, 2, 14834345051306101429),
            (64, 2, 3, 14581088419159624359),
            (13, 2, 4, 1869708704019773969),
            (300, 300, 5, 17303424503220959423),
        ];
        for (n, m, seed, want) in cases {
            let keys = sequence(n, 88172645463325252 + seed, m);
            let mut v: Vec<(u64, u64)> = keys.into_iter().enumerate().map(|(i, k)| (k, i as u64)).collect();
            sort_slice(&mut v, &mut |a, b| a.0 < b.0);
            let mut h: u64 = 1469598103934665603;
            for (_, id) in &v {
                h = (h ^ id).wrapping_mul(1099511628211);
            }
            assert_eq!(h, want, "n={n} m={m}");
        }
    }
}
