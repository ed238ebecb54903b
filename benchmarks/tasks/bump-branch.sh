set -e
tools git git-create-branch repo_path=$REPO branch_name=bump > /dev/null
tools git git-checkout repo_path=$REPO branch_name=bump > /dev/null
tools filesystem write-file path=$REPO/VERSION content=$'1.1\n' > /dev/null
tools git git-add repo_path=$REPO files='["VERSION"]' > /dev/null
tools git git-commit repo_path=$REPO message='Bump version to 1.1' | grep -oE '[0-9a-f]{40}'
