// hourglass: an operator's command over a daemon's HTTP API (ctl/).
#include <iostream>

#include "hourglass/ctl/ctl.hpp"

int main(int argc, char** argv) { return hourglass::ctl::run(argc, argv, std::cout, std::cerr); }
