#include "compiler/cli.h"

int main(int argc, char** argv) { return mlpc::run_cli(argc, argv); }
