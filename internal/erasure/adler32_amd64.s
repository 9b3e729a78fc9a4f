#include "textflag.h"

// Weights 32, 31, ..., 1 for the bytes of a block (signed bytes for
// VPMADDUBSW), and 16-bit ones for VPMADDWD.
DATA adlerWeights<>+0(SB)/8, $0x191a1b1c1d1e1f20
DATA adlerWeights<>+8(SB)/8, $0x1112131415161718
DATA adlerWeights<>+16(SB)/8, $0x090a0b0c0d0e0f10
DATA adlerWeights<>+24(SB)/8, $0x0102030405060708
GLOBL adlerWeights<>(SB), RODATA|NOPTR, $32

DATA adlerOnes<>+0(SB)/8, $0x0001000100010001
DATA adlerOnes<>+8(SB)/8, $0x0001000100010001
DATA adlerOnes<>+16(SB)/8, $0x0001000100010001
DATA adlerOnes<>+24(SB)/8, $0x0001000100010001
GLOBL adlerOnes<>(SB), RODATA|NOPTR, $32

// func adler32Blocks(p []byte) (sum, prefix, weighted uint32)
//
// Per 32-byte block: Y2 (prefix) += Y1 (sums of the blocks before);
// Y1 += VPSADBW (four 64-bit lanes of 8-byte sums, each below 2^32 for
// at most 1024 blocks); Y3 += the weighted bytes, as 8 int32 lanes of
// VPMADDUBSW pairs (at most 63·255) summed by VPMADDWD. Prefix lanes
// reach at most 2040·n²/2, so their total over 4 lanes stays below 2^32
// for n ≤ 1024.
TEXT ·adler32Blocks(SB), NOSPLIT, $0-36
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	SHRQ $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VMOVDQU adlerWeights<>(SB), Y4
	VMOVDQU adlerOnes<>(SB), Y5
	TESTQ CX, CX
	JZ   done

loop:
	VMOVDQU    (SI), Y6
	VPADDD     Y1, Y2, Y2
	VPSADBW    Y0, Y6, Y7
	VPADDD     Y7, Y1, Y1
	VPMADDUBSW Y4, Y6, Y8
	VPMADDWD   Y5, Y8, Y8
	VPADDD     Y8, Y3, Y3
	ADDQ       $32, SI
	DECQ       CX
	JNZ        loop

done:
	// Sum the eight 32-bit lanes of each accumulator.
	VEXTRACTI128 $1, Y1, X6
	VPADDD       X6, X1, X1
	VPSHUFD      $0x4e, X1, X6
	VPADDD       X6, X1, X1
	VPSHUFD      $0xb1, X1, X6
	VPADDD       X6, X1, X1
	VMOVD        X1, AX
	MOVL         AX, sum+24(FP)

	VEXTRACTI128 $1, Y2, X6
	VPADDD       X6, X2, X2
	VPSHUFD      $0x4e, X2, X6
	VPADDD       X6, X2, X2
	VPSHUFD      $0xb1, X2, X6
	VPADDD       X6, X2, X2
	VMOVD        X2, AX
	MOVL         AX, prefix+28(FP)

	VEXTRACTI128 $1, Y3, X6
	VPADDD       X6, X3, X3
	VPSHUFD      $0x4e, X3, X6
	VPADDD       X6, X3, X3
	VPSHUFD      $0xb1, X3, X6
	VPADDD       X6, X3, X3
	VMOVD        X3, AX
	MOVL         AX, weighted+32(FP)

	VZEROUPPER
	RET
