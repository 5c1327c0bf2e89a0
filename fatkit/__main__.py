from fatkit.cli import main

main()
