//! The arbitrary-precision integers of `FloatingDecimal`'s slow path (`FDBigInteger`): just what
//! [`super::java_float`] needs — powers of 5 and 2, ×10, shifts, sums, comparisons and one-digit quotients.

use std::cmp::Ordering;

/// A non-negative big integer, 32-bit limbs, least significant first, no high zero limbs.
#[derive(Clone, PartialEq, Eq)]
pub struct Big(Vec<u32>);

impl Big {
    pub fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    /// 5^p5 × 2^p2.
    pub fn pow52(p5: i32, p2: i32) -> Big {
        Big::from_u64(1).mul_pow52(p5, p2)
    }

    pub fn mul_pow52(mut self, p5: i32, p2: i32) -> Big {
        for _ in 0..p5.max(0) {
            self = self.mul_small(5);
        }
        self.shl(p2.max(0) as u32)
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    pub fn mul_small(mut self, k: u32) -> Big {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let p = u64::from(*limb) * u64::from(k) + carry;
            *limb = p as u32;
            carry = p >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
        self
    }

    pub fn shl(&self, n: u32) -> Big {
        let (words, bits) = ((n / 32) as usize, n % 32);
        let mut out = vec![0u32; words];
        let mut carry = 0u32;
        for &limb in &self.0 {
            if bits == 0 {
                out.push(limb);
            } else {
                out.push((limb << bits) | carry);
                carry = limb >> (32 - bits);
            }
        }
        if carry != 0 {
            out.push(carry);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    pub fn add(&self, other: &Big) -> Big {
        let n = self.0.len().max(other.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let s = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(other.0.get(i).copied().unwrap_or(0))
                + carry;
            out.push(s as u32);
            carry = s >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    /// self -= other (other <= self).
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let d = i64::from(self.0[i]) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            self.0[i] = d as u32;
            borrow = i64::from(d < 0);
        }
        self.trim();
    }

    /// `FDBigInteger.quoRemIteration`: returns self / s (a single digit) and leaves 10 × (self mod s).
    pub fn quo_rem_times_10(&mut self, s: &Big) -> i64 {
        let mut q = 0;
        while *self >= *s {
            self.sub_assign(s);
            q += 1;
        }
        *self = std::mem::replace(self, Big(Vec::new())).mul_small(10);
        q
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Big) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Big {
    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}
