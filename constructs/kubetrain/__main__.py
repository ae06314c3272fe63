from kubetrain.cli import main

main()
