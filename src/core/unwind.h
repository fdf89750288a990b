/* unwind.h — walking up the stack exactly, frame by frame, from the call-frame information
 * (.eh_frame) of a few known modules: this library and the wrappers between a program and the
 * allocator (libc, libstdc++, libgcc_s). sites.h uses it to name the caller of a wrapper: the
 * site of strdup(s) is the code that called strdup.
 *
 * Why not libgcc's unwinder: it finds a PC's table through dl_iterate_phdr (the loader's lock)
 * and may allocate, neither of which the allocation path may do. Why not a scan of the stack
 * for words that look like return addresses: it finds stale words left by earlier calls, and
 * which ones depends on frame layouts and on the code libc's ifuncs pick for the CPU.
 *
 * How: at start-up each module's .eh_frame_hdr (its sorted table of frame descriptions) is found
 * from the ELF headers mapped in memory (no loader call). A frame's rule is read from its FDE the
 * first time a PC is seen and kept in a lock-free cache of one word per entry.
 *
 * What it follows: x86-64 frames whose CFA is rsp+N or rbp+N, whose return address is at CFA-8,
 * and whose rbp is untouched or saved at a fixed offset from the CFA — what compilers emit for
 * ordinary functions. Anything else (a CFA expression, as in a function that realigns its stack;
 * a signal frame; a module without a table; another architecture) ends the walk as "unknown",
 * and the caller keeps the return address it has: no answer rather than a wrong one. */
#ifndef LOCUS_UNWIND_H
#define LOCUS_UNWIND_H

#include <elf.h>

#define UNWIND_MODULES     8
#define UNWIND_MAX_FRAMES  32
#define UNWIND_MAX_STACK   (1u << 20)   /* a walk never goes more than this far up the stack */
#define UNWIND_CACHE_SHIFT 10

/* The DWARF encodings and call-frame instructions read here (the DWARF 4 standard, and the
 * pointer encodings of the LSB's .eh_frame). */
enum {
  PE_absptr = 0x00, PE_uleb128 = 0x01, PE_udata2 = 0x02, PE_udata4 = 0x03, PE_udata8 = 0x04,
  PE_sleb128 = 0x09, PE_sdata2 = 0x0A, PE_sdata4 = 0x0B, PE_sdata8 = 0x0C,
  PE_pcrel = 0x10, PE_datarel = 0x30,
};
enum {
  CFA_nop = 0x00, CFA_set_loc = 0x01, CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03,
  CFA_advance_loc4 = 0x04, CFA_offset_extended = 0x05, CFA_restore_extended = 0x06,
  CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09, CFA_remember_state = 0x0A,
  CFA_restore_state = 0x0B, CFA_def_cfa = 0x0C, CFA_def_cfa_register = 0x0D, CFA_def_cfa_offset = 0x0E,
  CFA_def_cfa_expression = 0x0F, CFA_expression = 0x10, CFA_offset_extended_sf = 0x11,
  CFA_def_cfa_sf = 0x12, CFA_def_cfa_offset_sf = 0x13, CFA_val_offset = 0x14, CFA_val_offset_sf = 0x15,
  CFA_val_expression = 0x16, CFA_GNU_args_size = 0x2E,
};

typedef struct unwind_module {
  uintptr_t start, end;           /* the executable mapping */
  const uint8_t *hdr;             /* its .eh_frame_hdr, or NULL: frames here end the walk */
  const int32_t *table;           /* (initial PC, FDE) pairs, offsets from hdr, sorted by PC */
  uint32_t count;
} unwind_module_t;

static unwind_module_t unwind_mod[UNWIND_MODULES];
static unsigned unwind_nmod;

/* A frame's rule, cached as one word: the PC in bits 16-63; bit 15 set when the CFA is
 * rbp-based; bits 7-14 the CFA's offset in words; bits 0-6 k where rbp was saved at CFA - 8k
 * (0: not saved). A word with a zero CFA offset records "unknown" (a CFA is at least sp + 8). */
static _Atomic uint64_t unwind_cache[1u << UNWIND_CACHE_SHIFT];

/* ---- finding the tables (start-up) ---------------------------------------------------------- */

/* The .eh_frame_hdr of the ELF file mapped at `base` (its offset-0 mapping, `len` bytes). */
static const uint8_t *unwind_find_hdr(uintptr_t base, size_t len) {
  const Elf64_Ehdr *e = (const Elf64_Ehdr *)base;
  if (len < sizeof *e || memcmp(e->e_ident, ELFMAG, SELFMAG) || e->e_ident[EI_CLASS] != ELFCLASS64 ||
      e->e_phentsize != sizeof(Elf64_Phdr) || e->e_phoff + (size_t)e->e_phnum * sizeof(Elf64_Phdr) > len)
    return NULL;
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + e->e_phoff);
  uintptr_t bias = 0;
  bool have_bias = false;
  for (unsigned i = 0; i < e->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) { bias = base - (uintptr_t)ph[i].p_vaddr; have_bias = true; break; }
  if (!have_bias) return NULL;
  for (unsigned i = 0; i < e->e_phnum; i++)
    if (ph[i].p_type == PT_GNU_EH_FRAME) return (const uint8_t *)(bias + ph[i].p_vaddr);
  return NULL;
}

/* Records the executable mapping [start, end) of the file whose offset-0 mapping is
 * [base, base + len) (len 0: not known). Start-up only, before threads can walk. */
static void unwind_module_add(uintptr_t start, uintptr_t end, uintptr_t base, size_t len) {
  if (unwind_nmod >= UNWIND_MODULES) return;
  unwind_module_t *m = &unwind_mod[unwind_nmod++];
  *m = (unwind_module_t){ start, end, NULL, NULL, 0 };
#if defined(__x86_64__)
  const uint8_t *h = len ? unwind_find_hdr(base, len) : NULL;
  /* version 1; the table as (datarel, sdata4) pairs and its count as udata4: what every
   * linker writes. Another encoding: no table. */
  if (!h || h[0] != 1 || h[2] != (PE_udata4) || h[3] != (PE_datarel | PE_sdata4)) return;
  const uint8_t *p = h + 4;
  switch (h[1] & 0x0F) {            /* eh_frame_ptr: skipped */
  case PE_udata4: case PE_sdata4: p += 4; break;
  case PE_absptr: case PE_udata8: case PE_sdata8: p += 8; break;
  default: return;
  }
  uint32_t count;
  memcpy(&count, p, 4);
  m->hdr = h;
  m->table = (const int32_t *)(p + 4);
  m->count = count;
#else
  (void)base; (void)len;
#endif
}

static const unwind_module_t *unwind_module_of(uintptr_t pc) {
  for (unsigned i = 0; i < unwind_nmod; i++)
    if (pc - unwind_mod[i].start < unwind_mod[i].end - unwind_mod[i].start) return &unwind_mod[i];
  return NULL;
}

/* Whether pc lies in one of the modules the walk goes through. */
static bool unwind_known(uintptr_t pc) { return unwind_module_of(pc) != NULL; }

/* ---- reading a frame description ------------------------------------------------------------ */

static uint64_t unwind_uleb(const uint8_t **p, const uint8_t *end) {
  uint64_t v = 0;
  for (unsigned shift = 0; *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    if (shift < 64) v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

static int64_t unwind_sleb(const uint8_t **p, const uint8_t *end) {
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b = 0;
  while (*p < end) {
    b = *(*p)++;
    if (shift < 64) v |= (uint64_t)(b & 0x7F) << shift;
    shift += 7;
    if (!(b & 0x80)) break;
  }
  if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

/* A pointer in encoding `enc` (PE_*; pc-relative or absolute, never indirect); *ok false
 * when the encoding is one this reader does not take. */
static uintptr_t unwind_pointer(const uint8_t **p, const uint8_t *end, uint8_t enc, bool *ok) {
  const uint8_t *at = *p;
  uint64_t v = 0;
  switch (enc & 0x0F) {
  case PE_absptr: case PE_udata8: case PE_sdata8: memcpy(&v, at, 8); *p += 8; break;
  case PE_udata4: { uint32_t u; memcpy(&u, at, 4); v = u; *p += 4; break; }
  case PE_sdata4: { int32_t s; memcpy(&s, at, 4); v = (uint64_t)(int64_t)s; *p += 4; break; }
  case PE_udata2: { uint16_t u; memcpy(&u, at, 2); v = u; *p += 2; break; }
  case PE_sdata2: { int16_t s; memcpy(&s, at, 2); v = (uint64_t)(int64_t)s; *p += 2; break; }
  case PE_uleb128: v = unwind_uleb(p, end); break;
  case PE_sleb128: v = (uint64_t)unwind_sleb(p, end); break;
  default: *ok = false; return 0;
  }
  switch (enc & 0x70) {
  case PE_absptr: break;
  case PE_pcrel: v += (uintptr_t)at; break;
  default: *ok = false;
  }
  return (uintptr_t)v;
}

/* The registers a rule speaks of (DWARF numbers on x86-64). */
enum { UNWIND_RBP = 6, UNWIND_RSP = 7 };

typedef struct unwind_rule {
  uint8_t cfa_reg;                /* UNWIND_RSP or UNWIND_RBP, else unknown */
  bool rbp_saved, ra_ok, bad;     /* ra_ok: the return address is at CFA - 8 */
  int64_t cfa_off, rbp_off;       /* CFA = reg + cfa_off; rbp saved at CFA + rbp_off */
} unwind_rule_t;

static void unwind_set_reg(unwind_rule_t *r, uint64_t reg, unsigned ra_reg, bool saved, int64_t off) {
  if (reg == UNWIND_RBP) { r->rbp_saved = saved; r->rbp_off = off; }
  else if (reg == ra_reg) r->ra_ok = saved && off == -8;
}

/* CFA_restore: reg back to the CIE's rule `init` (none while the CIE itself runs). */
static void unwind_restore_reg(unwind_rule_t *r, const unwind_rule_t *init, uint64_t reg, unsigned ra_reg) {
  if (!init) return;
  if (reg == UNWIND_RBP) { r->rbp_saved = init->rbp_saved; r->rbp_off = init->rbp_off; }
  else if (reg == ra_reg) r->ra_ok = init->ra_ok;
}

/* Runs the call-frame instructions [p, end) from address loc up to and including pc. `init`
 * is the CIE's rule (CFA_restore's target); NULL while running the CIE itself. */
static void unwind_run(unwind_rule_t *r, const unwind_rule_t *init, const uint8_t *p, const uint8_t *end,
                       uintptr_t loc, uintptr_t pc, uint64_t code_align, int64_t data_align, unsigned ra_reg,
                       uint8_t fde_enc) {
  unwind_rule_t saved[4];
  unsigned nsaved = 0;
  bool ok = true;
  while (p < end && !r->bad) {
    uint8_t op = *p++;
    uint64_t reg, delta = 0;
    switch (op >> 6) {
    case 1: delta = (op & 0x3F) * code_align; break;                                   /* advance_loc */
    case 2: unwind_set_reg(r, op & 0x3F, ra_reg, true, (int64_t)unwind_uleb(&p, end) * data_align); continue;
    case 3: unwind_restore_reg(r, init, op & 0x3F, ra_reg); continue;                 /* restore */
    default:
      switch (op) {
      case CFA_nop: continue;
      case CFA_set_loc: loc = unwind_pointer(&p, end, fde_enc, &ok); if (loc > pc || !ok) return; continue;
      case CFA_advance_loc1: delta = *p++ * code_align; break;
      case CFA_advance_loc2: { uint16_t d; memcpy(&d, p, 2); p += 2; delta = d * code_align; break; }
      case CFA_advance_loc4: { uint32_t d; memcpy(&d, p, 4); p += 4; delta = d * code_align; break; }
      case CFA_offset_extended: reg = unwind_uleb(&p, end);
        unwind_set_reg(r, reg, ra_reg, true, (int64_t)unwind_uleb(&p, end) * data_align); continue;
      case CFA_offset_extended_sf: reg = unwind_uleb(&p, end);
        unwind_set_reg(r, reg, ra_reg, true, unwind_sleb(&p, end) * data_align); continue;
      case CFA_restore_extended: unwind_restore_reg(r, init, unwind_uleb(&p, end), ra_reg); continue;
      case CFA_undefined: case CFA_same_value: reg = unwind_uleb(&p, end);
        unwind_set_reg(r, reg, ra_reg, false, 0); continue;
      case CFA_register: reg = unwind_uleb(&p, end); unwind_uleb(&p, end);
        if (reg == UNWIND_RBP || reg == ra_reg) r->bad = true;   /* kept in another register */
        continue;
      case CFA_remember_state: if (nsaved < 4) saved[nsaved++] = *r; else r->bad = true; continue;
      case CFA_restore_state: if (nsaved) *r = saved[--nsaved]; else r->bad = true; continue;
      case CFA_def_cfa: r->cfa_reg = (uint8_t)unwind_uleb(&p, end); r->cfa_off = (int64_t)unwind_uleb(&p, end); continue;
      case CFA_def_cfa_sf: r->cfa_reg = (uint8_t)unwind_uleb(&p, end); r->cfa_off = unwind_sleb(&p, end) * data_align; continue;
      case CFA_def_cfa_register: r->cfa_reg = (uint8_t)unwind_uleb(&p, end); continue;
      case CFA_def_cfa_offset: r->cfa_off = (int64_t)unwind_uleb(&p, end); continue;
      case CFA_def_cfa_offset_sf: r->cfa_off = unwind_sleb(&p, end) * data_align; continue;
      case CFA_def_cfa_expression: r->bad = true; continue;
      case CFA_expression: case CFA_val_expression: reg = unwind_uleb(&p, end);
        p += unwind_uleb(&p, end);
        if (reg == UNWIND_RBP || reg == ra_reg || reg == UNWIND_RSP) r->bad = true;
        continue;
      case CFA_val_offset: case CFA_val_offset_sf: reg = unwind_uleb(&p, end);
        if (op == CFA_val_offset) unwind_uleb(&p, end); else unwind_sleb(&p, end);
        if (reg == UNWIND_RBP || reg == ra_reg) r->bad = true;
        continue;
      case CFA_GNU_args_size: unwind_uleb(&p, end); continue;
      default: r->bad = true; continue;                   /* an instruction this reader lacks */
      }
    }
    if (loc + delta > pc) return;
    loc += delta;
  }
}

/* The rule at pc (an instruction address: a return address minus one) from the module's
 * table; .bad when there is none. */
static unwind_rule_t unwind_rule_at(const unwind_module_t *m, uintptr_t pc) {
  unwind_rule_t r = { .bad = true };
  if (!m->hdr || !m->count) return r;
  /* the last table entry whose initial PC is at or below pc */
  intptr_t rel = (intptr_t)(pc - (uintptr_t)m->hdr);
  uint32_t lo = 0, hi = m->count;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (m->table[2 * mid] <= rel) lo = mid; else hi = mid;
  }
  if (m->table[2 * lo] > rel) return r;
  const uint8_t *fde = m->hdr + m->table[2 * lo + 1];
  uint32_t len, cie_off;
  memcpy(&len, fde, 4);
  memcpy(&cie_off, fde + 4, 4);
  if (len == 0xFFFFFFFFu || len < 8 || !cie_off) return r;
  const uint8_t *fde_end = fde + 4 + len, *cie = fde + 4 - cie_off;
  memcpy(&len, cie, 4);
  if (len == 0xFFFFFFFFu) return r;
  const uint8_t *cie_end = cie + 4 + len, *p = cie + 8;
  uint8_t version = *p++;
  const char *aug = (const char *)p;
  p += strlen(aug) + 1;
  if (aug[0] && aug[0] != 'z') return r;                    /* "eh" and older forms */
  uint64_t code_align = unwind_uleb(&p, cie_end);
  int64_t data_align = unwind_sleb(&p, cie_end);
  unsigned ra_reg = version == 1 ? *p++ : (unsigned)unwind_uleb(&p, cie_end);
  uint8_t fde_enc = PE_absptr;
  bool ok = true;
  if (aug[0] == 'z') {
    uint64_t n = unwind_uleb(&p, cie_end);
    const uint8_t *q = p;
    for (const char *a = aug + 1; *a && ok; a++) {
      if (*a == 'R') fde_enc = *q++;
      else if (*a == 'L') q++;
      else if (*a == 'P') { uint8_t enc = *q++; unwind_pointer(&q, cie_end, enc & 0x7F, &ok); }
      else if (*a == 'S') ok = false;                       /* a signal frame */
      else if (*a != 'B') ok = false;
    }
    p += n;
  }
  if (!ok) return r;
  unwind_rule_t init = { .cfa_reg = 0 };
  unwind_run(&init, NULL, p, cie_end, 0, UINTPTR_MAX, code_align, data_align, ra_reg, fde_enc);
  const uint8_t *f = fde + 8;
  uintptr_t begin = unwind_pointer(&f, fde_end, fde_enc, &ok);
  uintptr_t range = unwind_pointer(&f, fde_end, fde_enc & 0x0F, &ok);
  if (!ok || pc < begin || pc - begin >= range) return r;
  if (aug[0] == 'z') f += unwind_uleb(&f, fde_end);
  r = init;
  if (!r.bad) unwind_run(&r, &init, f, fde_end, begin, pc, code_align, data_align, ra_reg, fde_enc);
  if ((r.cfa_reg != UNWIND_RSP && r.cfa_reg != UNWIND_RBP) || !r.ra_ok || r.cfa_off < 8) r.bad = true;
  return r;
}

/* The rule at pc through the cache (a rule that does not fit a word is read every time). */
static unwind_rule_t unwind_rule_cached(const unwind_module_t *m, uintptr_t pc) {
  _Atomic uint64_t *slot = &unwind_cache[(pc * 0x9E3779B97F4A7C15ull) >> (64 - UNWIND_CACHE_SHIFT)];
  uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
  if (w && w >> 16 == pc) {
    unwind_rule_t r = { .cfa_reg = w & 0x8000 ? UNWIND_RBP : UNWIND_RSP, .cfa_off = (int64_t)((w >> 7) & 0xFF) * 8,
                        .rbp_saved = (w & 0x7F) != 0, .rbp_off = -(int64_t)(w & 0x7F) * 8, .ra_ok = true };
    r.bad = r.cfa_off == 0;
    return r;
  }
  unwind_rule_t r = unwind_rule_at(m, pc);
  if (pc >> 48) return r;
  if (r.bad) w = pc << 16;
  else if (r.cfa_off % 8 || r.cfa_off / 8 > 0xFF || (r.rbp_saved && (r.rbp_off >= 0 || r.rbp_off % 8 || -r.rbp_off / 8 > 0x7F)))
    return r;
  else w = pc << 16 | (r.cfa_reg == UNWIND_RBP ? 0x8000u : 0) | (uint64_t)(r.cfa_off / 8) << 7 |
           (r.rbp_saved ? (uint64_t)(-r.rbp_off / 8) : 0);
  atomic_store_explicit(slot, w, memory_order_relaxed);
  return r;
}

/* ---- the walk ------------------------------------------------------------------------------- */

/* The first return address up the stack from this call that lies outside the known modules;
 * 0 when the walk cannot say (a frame it cannot follow, or none outside within the limits). */
static NOINLINE uintptr_t unwind_first_outside(void) {
#if defined(__x86_64__)
  uintptr_t pc, sp, bp;
  __asm__ volatile("lea 0f(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2\n0:" : "=r"(pc), "=r"(sp), "=r"(bp));
  uintptr_t top = sp + UNWIND_MAX_STACK;
  bool is_return = false;   /* the first pc is an instruction, the others return addresses */
  for (unsigned n = 0; n < UNWIND_MAX_FRAMES; n++) {
    const unwind_module_t *m = unwind_module_of(pc);
    if (!m) return n ? pc : 0;
    unwind_rule_t r = unwind_rule_cached(m, pc - is_return);
    if (r.bad) return 0;
    uintptr_t cfa = (r.cfa_reg == UNWIND_RSP ? sp : bp) + (uintptr_t)r.cfa_off;
    if (cfa <= sp || cfa > top) return 0;
    if (r.rbp_saved) bp = __atomic_load_n((const uintptr_t *)(cfa + (uintptr_t)r.rbp_off), __ATOMIC_RELAXED);
    pc = __atomic_load_n((const uintptr_t *)(cfa - 8), __ATOMIC_RELAXED);
    sp = cfa;
    is_return = true;
  }
#endif
  return 0;
}

#endif
