#include <cstdio>
int main() { std::puts("peregrine"); return 0; }
