/* T12a: a union whose members are bitfields (each starts at bit 0 of the union). */
// probe: union t12_u
union t12_u {
	unsigned a : 3;
	unsigned char b : 5;
	int c : 20;
};
