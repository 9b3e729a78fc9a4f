#include "textflag.h"

// Fold constants for a distance of 512 bits with the bit-reflected IEEE
// polynomial, in the form of the Intel paper "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ": x^544 mod P for the low qword of
// a lane and x^480 mod P for the high one, each reflected and shifted
// left by one (hash/crc32 folds with the same pair; TestFoldConstants
// derives them).
DATA ieeeFold512<>+0(SB)/8, $0x154442bd4
DATA ieeeFold512<>+8(SB)/8, $0x1c6e41596
GLOBL ieeeFold512<>(SB), RODATA|NOPTR, $16

// func ieeeFold256(crc uint32, p []byte, state *[64]byte)
//
// Folds p (len(p) a positive multiple of 64), whose first four bytes are
// first XORed with crc, into 64 bytes whose CRC (initial value 0) is that
// of p: four 128-bit lanes in two YMM registers, each folded over the
// next 64 bytes per round with one VPCLMULQDQ per qword. VPCLMULQDQ on
// YMM registers needs only AVX2 and the VPCLMULQDQ feature, not AVX-512.
TEXT ·ieeeFold256(SB), NOSPLIT, $0-40
	MOVL    crc+0(FP), AX
	MOVQ    p_base+8(FP), SI
	MOVQ    p_len+16(FP), CX
	MOVQ    state+32(FP), DI
	VMOVD   AX, X0
	VMOVDQU (SI), Y1
	VMOVDQU 32(SI), Y2
	VPXOR   Y0, Y1, Y1
	ADDQ    $64, SI
	SUBQ    $64, CX
	VBROADCASTI128 ieeeFold512<>(SB), Y0

loop:
	CMPQ       CX, $0
	JE         done
	VPCLMULQDQ $0x00, Y0, Y1, Y3
	VPCLMULQDQ $0x11, Y0, Y1, Y1
	VPCLMULQDQ $0x00, Y0, Y2, Y4
	VPCLMULQDQ $0x11, Y0, Y2, Y2
	VPXOR      (SI), Y3, Y3
	VPXOR      32(SI), Y4, Y4
	VPXOR      Y3, Y1, Y1
	VPXOR      Y4, Y2, Y2
	ADDQ       $64, SI
	SUBQ       $64, CX
	JMP        loop

done:
	VMOVDQU Y1, (DI)
	VMOVDQU Y2, 32(DI)
	VZEROUPPER
	RET

// func cpuidLeaf7ECX() uint32
TEXT ·cpuidLeaf7ECX(SB), NOSPLIT, $0-4
	MOVL  $7, AX
	MOVL  $0, CX
	CPUID
	MOVL  CX, ret+0(FP)
	RET
